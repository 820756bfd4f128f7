package qpme

// transitions adds the immediate transitions of Fig. 8 (SimQPN simulates
// immediate transitions only; every delay sits in a queueing place).
func (b *builder) transitions() {
	burst := 1
	if b.opt.Pattern == PatternBursty {
		burst = b.opt.Burst
	}
	threshold, _, gc := gcParams(b.cal)
	b.transition("arrive", 0, 50, mode{name: "arrive",
		in:  []flow{{placeArrivals, colorArrival, 1}},
		out: []flow{{placeArrivals, colorArrival, 1}, {placeInput, colorMsg, burst}}})

	// accept: the paper's transition out of input, enabled only while the
	// collector is idle; each message leaves a garbage token.
	first, last := b.broker[0], b.broker[len(b.broker)-1]
	acceptMsg := mode{name: "msg", in: []flow{{placeInput, colorMsg, 1}},
		out: []flow{{first, colorMsg, 1}, {placeQueue, colorMsg, 1}}}
	acceptAck := mode{name: "ack", in: []flow{{placeInput, colorAck, 1}}, out: []flow{{PlaceAcceptAck, colorAck, 1}}}
	if gc {
		idle := flow{placeGCIdle, colorCollector, 1}
		acceptMsg.in = append(acceptMsg.in, idle)
		acceptMsg.out = append(acceptMsg.out, idle, flow{placeGCIdle, colorGarbage, 1})
		acceptAck.in = append(acceptAck.in, idle)
		acceptAck.out = append(acceptAck.out, idle)
	}
	accept := []mode{acceptMsg}
	if b.acks {
		accept = append(accept, acceptAck)
	}
	b.transition("accept", 0, 150, accept...)
	for i, s := range b.broker[1:] {
		b.transition("to-"+s, 0, 275+150*i, mode{name: "msg",
			in: []flow{{b.broker[i], colorMsg, 1}}, out: []flow{{s, colorMsg, 1}}})
	}

	// sent: the copy left the broker. Without acknowledgements the message
	// stops occupying storage here; with them the consumer's ack comes back
	// into input and frees it.
	sent := mode{name: "msg", in: []flow{{last, colorMsg, 1}}}
	if b.system {
		sent.out = append(sent.out, flow{PlaceSystem, colorMsg, 1})
		b.transition("departed", 0, 800, mode{name: "msg", in: []flow{{PlaceSystem, colorMsg, 1}}})
	}
	if b.acks {
		sent.out = append(sent.out, flow{placeInput, colorAck, 1})
		b.transition("acked", 0, 725, mode{name: "ack",
			in: []flow{{PlaceAcceptAck, colorAck, 1}, {placeQueue, colorMsg, 1}}})
	} else {
		sent.in = append(sent.in, flow{placeQueue, colorMsg, 1})
	}
	b.transition("sent", 0, 575, sent)

	if gc {
		// gc-start outranks accept, so a pause begins as soon as the
		// threshold's garbage is there.
		b.transition("gc-start", 1, 175, mode{name: "collect",
			in:  []flow{{placeGCIdle, colorCollector, 1}, {placeGCIdle, colorGarbage, threshold}},
			out: []flow{{placeGCActive, colorCollector, 1}}})
		b.transition("gc-end", 0, 25, mode{name: "resume",
			in: []flow{{placeGCActive, colorCollector, 1}}, out: []flow{{placeGCIdle, colorCollector, 1}}})
	}
}

// transition adds an immediate transition with its modes, the incidence
// function (colour reference → mode → colour reference, with counts) and
// the net connections between the places and it.
func (b *builder) transition(name string, priority, x int, modes ...mode) {
	id := transitionID(name)
	t := el("transition", "id", id, "name", name, "priority", itoa(priority), "weight", "1", "xsi:type", "immediate-transition")
	ms, cs := t.child("modes"), t.child("connections")
	for _, m := range modes {
		mid := modeID(name, m.name)
		ms.add(el("mode", "id", mid, "name", m.name, "firing-weight", "1", "real-color", "#000000"))
		for _, f := range m.in {
			cs.add(el("connection", "id", b.nextID("i"), "source-id", refID(f.place, f.color), "target-id", mid, "count", itoa(f.count)))
			b.connect(placeID(f.place), id)
		}
		for _, f := range m.out {
			cs.add(el("connection", "id", b.nextID("i"), "source-id", mid, "target-id", refID(f.place, f.color), "count", itoa(f.count)))
			b.connect(id, placeID(f.place))
		}
	}
	t.child("meta-attributes").add(b.location(x, 175))
	b.section("transitions").add(t)
}

// connect adds the net connection from → to once.
func (b *builder) connect(from, to string) {
	k := [2]string{from, to}
	if b.conns[k] {
		return
	}
	b.conns[k] = true
	b.section("connections").add(el("connection", "id", b.nextID("n"), "source-id", from, "target-id", to))
}

// probe measures what brokertrace measures: from a message's entry into
// the first broker stage to its exit from the last (system is outside).
func (b *builder) probe() {
	p := el("probe", "id", "_pr_latency", "name", "broker-latency",
		"start-place-id", placeID(b.broker[0]), "start-trigger", "entry",
		"end-place-id", placeID(b.broker[len(b.broker)-1]), "end-trigger", "exit")
	p.child("color-refs").add(el("color-ref", "id", "_pr_latency_msg", "color-id", colorID(colorMsg), "xsi:type", "probe-color-reference"))
	p.child("meta-attributes").add(el("meta-attribute", "id", "_pc__pr_latency", "configuration-name", configName,
		"statsLevel", "2", "xsi:type", "simqpn-place-configuration"))
	b.section("probes").add(p)
}

// config adds the SimQPN run configuration: a fixed-length batch-means run.
func (b *builder) config() {
	l := b.opt.RunLength
	b.section("meta-attributes").add(el("meta-attribute", "id", "_cfg", "configuration-name", configName,
		"configuration-description", "written by brokertrace export; times in seconds",
		"number-of-runs", "1", "output-directory", ".", "ramp-up-length", num(l/10), "scenario", "1",
		"seconds-between-heart-beats", "60", "seconds-between-stop-checks", "60", "stopping-rule", "FIXEDLEN",
		"time-before-initial-heart-beat", num(l/10), "time-between-stop-checks", num(l/10),
		"total-run-length", num(l), "verbosity-level", "0", "xsi:type", "simqpn-configuration"))
}
