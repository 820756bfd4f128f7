package qpme

import (
	"fmt"
	"slices"

	"github.com/brokertrace/brokertrace/recfile"
)

// Colours of the net: the paper's msg, ack, collector and garbage, and
// arrival for the token that paces the harness.
const (
	colorMsg       = "msg"
	colorAck       = "ack"
	colorCollector = "collector"
	colorGarbage   = "garbage"
	colorArrival   = "arrival"
)

// Places beside the stages.
const (
	placeArrivals = "arrivals"
	placeInput    = "input"
	placeQueue    = "queue"
	placeGCIdle   = "gc-idle"
	placeGCActive = "gc-active"
)

// configName is the SimQPN configuration the file carries.
const configName = "brokertrace"

// flow is one arc weight of a transition mode: count tokens of a colour
// taken from (in) or put into (out) a place.
type flow struct {
	place, color string
	count        int
}

type mode struct {
	name    string
	in, out []flow
}

// builder assembles the net. IDs are derived from names ("_p_input",
// "_cr_input_msg", …) so the file is stable from one export to the next.
type builder struct {
	cal    *recfile.Calibration
	opt    Options
	net    *node
	places map[string]*node
	conns  map[[2]string]bool // net connections already made
	n      int                // counter for connection ids
	files  []File
	broker []string // the broker's stages present, in order
	system bool     // the calibration has a system stage
	acks   bool     // … and an accept-ack stage
}

func newBuilder(cal *recfile.Calibration, opt Options) *builder {
	b := &builder{cal: cal, opt: opt, places: map[string]*node{}, conns: map[[2]string]bool{}}
	b.net = el("net", "qpme-version", Version, "xmlns:xsi", xsiNS)
	for _, c := range []string{"colors", "queues", "places", "transitions", "connections", "probes", "meta-attributes"} {
		b.net.child(c)
	}
	return b
}

func placeID(name string) string          { return "_p_" + name }
func colorID(name string) string          { return "_c_" + name }
func queueID(name string) string          { return "_q_" + name }
func refID(place, color string) string    { return "_cr_" + place + "_" + color }
func transitionID(name string) string     { return "_t_" + name }
func modeID(trans, name string) string    { return "_m_" + trans + "_" + name }
func (b *builder) nextID(p string) string { b.n++; return fmt.Sprintf("_%s%d", p, b.n) }
func (b *builder) section(n string) *node { return b.net.child(n) }
func (b *builder) location(x, y int) *node {
	return el("meta-attribute", "location-x", itoa(x), "location-y", itoa(y), "xsi:type", "location-attribute")
}

// chain lists the stages present with a positive demand, in the order a
// message passes them; a calibration may lack one (a broker whose one
// thread reads and writes has no "between" stage).
func chain(cal *recfile.Calibration, names ...string) []string {
	var out []string
	for _, n := range names {
		if st, ok := stage(cal, n); ok && st.MeanNs > 0 {
			out = append(out, n)
		}
	}
	return out
}

func (b *builder) build() error {
	b.broker = chain(b.cal, PlaceAcceptMsg, PlaceProcess, PlaceDispatch)
	if len(b.broker) == 0 {
		return fmt.Errorf("%w: none of accept-msg, process, dispatch has a positive mean_ns (have %d stages)", errNoStages, len(b.cal.Stages))
	}
	b.system = len(chain(b.cal, PlaceSystem)) == 1
	b.acks = len(chain(b.cal, PlaceAcceptAck)) == 1
	stages := slices.Clone(b.broker)
	if b.system {
		stages = append(stages, PlaceSystem)
	}
	if b.acks {
		stages = append(stages, PlaceAcceptAck)
	}
	b.colors()
	if err := b.timedPlaces(stages); err != nil {
		return err
	}
	b.ordinaryPlaces()
	b.transitions()
	b.probe()
	b.config()
	return nil
}

func (b *builder) colors() {
	c := b.section("colors")
	add := func(name, rgb, desc string) {
		c.add(el("color", "id", colorID(name), "name", name, "real-color", rgb, "description", desc))
	}
	add(colorArrival, "#808080", "paces the arrivals: one token, one pass per message or burst")
	add(colorMsg, "#1f77b4", "a message")
	if b.acks {
		add(colorAck, "#ff7f0e", "an acknowledgement")
	}
	if _, _, gc := gcParams(b.cal); gc {
		add(colorCollector, "#2ca02c", "the garbage collector")
		add(colorGarbage, "#8c564b", "garbage one message leaves")
	}
}

// place adds a place element at column x of row y.
func (b *builder) place(name, typ string, x, y int, kv ...string) *node {
	p := el("place", append([]string{"id", placeID(name), "name", name, "departure-discipline", "NORMAL", "xsi:type", typ}, kv...)...)
	p.child("color-refs")
	p.child("meta-attributes").add(b.location(x, y),
		el("meta-attribute", "id", "_pc_"+name, "configuration-name", configName, "statsLevel", "2", "xsi:type", "simqpn-place-configuration"))
	b.section("places").add(p)
	b.places[name] = p
	return p
}

// ordinaryRef adds a colour to an ordinary place, with its initial tokens.
func (b *builder) ordinaryRef(place, color string, initial int) {
	b.places[place].child("color-refs").add(el("color-ref", "id", refID(place, color), "color-id", colorID(color),
		"initial-population", itoa(initial), "maximum-capacity", "0", "xsi:type", "ordinary-color-reference"))
}

// queueingRef adds a colour to a queueing place with its service-time
// distribution (attribute pairs, distribution-function first).
func (b *builder) queueingRef(place, color string, initial int, dist []string) {
	kv := append([]string{"id", refID(place, color), "color-id", colorID(color), "initial-population", itoa(initial),
		"maximum-capacity", "0", "priority", "0", "ranking", "0"}, dist...)
	b.places[place].child("color-refs").add(el("color-ref", append(kv, "xsi:type", "queueing-color-reference")...))
}

func (b *builder) queue(name, strategy string, servers int) {
	b.section("queues").add(el("queue", "id", queueID(name), "name", name, "number-of-servers", itoa(servers), "strategy", strategy))
}

// timedPlaces adds the arrivals place, the stages and gc-active, each with
// its queue and distributions.
func (b *builder) timedPlaces(stages []string) error {
	cpus := max(b.cal.CPUs, 1)
	b.queue(placeArrivals, "IS", 1)
	b.place(placeArrivals, "queueing-place", 0, 0, "queue-ref", queueID(placeArrivals))
	b.queueingRef(placeArrivals, colorArrival, 1, b.interArrival())
	if b.opt.Strategy == StrategyPS {
		b.queue("cpu", "PS", cpus)
	}
	for i, s := range stages {
		q := "cpu"
		if b.opt.Strategy == StrategyFCFS {
			q = s
			if s == PlaceSystem {
				b.queue(q, "PS", cpus) // the kernel's work runs on any CPU
			} else {
				b.queue(q, "FCFS", 1)
			}
		}
		color, y := colorMsg, 100
		if s == PlaceAcceptAck {
			color, y = colorAck, 250
		}
		b.place(s, "queueing-place", 200+150*min(i, 3), y, "queue-ref", queueID(q))
		st, _ := stage(b.cal, s)
		dist, err := b.demand(st)
		if err != nil {
			return err
		}
		b.queueingRef(s, color, 0, dist)
	}
	if _, pause, gc := gcParams(b.cal); gc {
		b.queue(placeGCActive, "IS", 1)
		b.place(placeGCActive, "queueing-place", 100, 400, "queue-ref", queueID(placeGCActive))
		b.queueingRef(placeGCActive, colorCollector, 0, b.constant(pause))
	}
	return nil
}

// ordinaryPlaces adds input, queue and gc-idle.
func (b *builder) ordinaryPlaces() {
	b.place(placeInput, "ordinary-place", 100, 100)
	b.ordinaryRef(placeInput, colorMsg, 0)
	if b.acks {
		b.ordinaryRef(placeInput, colorAck, 0)
	}
	b.place(placeQueue, "ordinary-place", 350, 250)
	b.ordinaryRef(placeQueue, colorMsg, 0)
	if _, _, gc := gcParams(b.cal); gc {
		b.place(placeGCIdle, "ordinary-place", 100, 250)
		b.ordinaryRef(placeGCIdle, colorCollector, 1)
		b.ordinaryRef(placeGCIdle, colorGarbage, 0)
	}
}
