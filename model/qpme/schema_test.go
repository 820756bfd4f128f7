package qpme

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"slices"
	"strconv"
)

// The rules below are what QPME's qpme.xsd (sources/qpme.model/schema/ in
// github.com/DescartesResearch/QPME) requires of a net, restated by hand:
// the order of the net's sections, every element's required attributes and
// enumerations, xsi:type of the polymorphic elements, unique ids and the
// kind of element every IDREF points at. Plus what SimQPN's loader needs
// of the distributions the exporter uses (lambda > 0; pdf_filename, scale
// and offset for Empirical).

var (
	netSections  = []string{"colors", "queues", "places", "transitions", "connections", "probes", "meta-attributes"}
	strategies   = []string{"PRIO", "PS", "FCFS", "IS", "RANDOM"}
	distribution = []string{"Beta", "BreitWigner", "BreitWignerMeanSquare", "ChiSquare", "Gamma", "Hyperbolic",
		"Exponential", "ExponentialPower", "Logarithmic", "Normal", "StudentT", "Uniform", "VonMises", "Empirical", "Deterministic"}
	simqpnConfigAttrs = []string{"id", "configuration-name", "output-directory", "ramp-up-length", "scenario",
		"seconds-between-heart-beats", "seconds-between-stop-checks", "stopping-rule", "time-before-initial-heart-beat",
		"time-between-stop-checks", "total-run-length", "verbosity-level"}
)

func parseNet(data []byte) (*node, error) {
	var n node
	if err := xml.NewDecoder(bytes.NewReader(data)).Decode(&n); err != nil {
		return nil, err
	}
	return &n, nil
}

func (n *node) attr(local string) (string, bool) {
	for _, a := range n.Attrs {
		if a.Name.Local == local && a.Name.Space != "xmlns" {
			return a.Value, true
		}
	}
	return "", false
}

func (n *node) get(local string) string { v, _ := n.attr(local); return v }

// kids returns the children named name of the child section sec.
func (n *node) kids(sec, name string) []*node {
	var out []*node
	for _, s := range n.Kids {
		if s.XMLName.Local != sec {
			continue
		}
		for _, k := range s.Kids {
			if k.XMLName.Local == name {
				out = append(out, k)
			}
		}
	}
	return out
}

// checker collects violations.
type checker struct {
	errs []string
	kind map[string]string // id → element kind: color, queue, place, transition, mode, ref, …
	// owner: the place of each colour reference, the transition of each mode.
	owner map[string]string
}

func (c *checker) errorf(format string, a ...any) { c.errs = append(c.errs, fmt.Sprintf(format, a...)) }

func (c *checker) require(n *node, what string, names ...string) {
	for _, a := range names {
		if _, ok := n.attr(a); !ok {
			c.errorf("%s %q lacks required attribute %s", what, n.get("id"), a)
		}
	}
}

func (c *checker) enum(n *node, what, a string, allowed []string) {
	if v := n.get(a); !slices.Contains(allowed, v) {
		c.errorf("%s %q: %s=%q is not one of %v", what, n.get("id"), a, v, allowed)
	}
}

func (c *checker) unsigned(n *node, what string, names ...string) {
	for _, a := range names {
		if v, ok := n.attr(a); ok {
			if _, err := strconv.ParseUint(v, 10, 32); err != nil {
				c.errorf("%s %q: %s=%q is not an unsigned int", what, n.get("id"), a, v)
			}
		}
	}
}

func (c *checker) define(n *node, kind, owner string) {
	id := n.get("id")
	if id == "" {
		return
	}
	if _, dup := c.kind[id]; dup {
		c.errorf("id %q defined twice", id)
	}
	c.kind[id] = kind
	c.owner[id] = owner
}

// points checks that IDREF attribute a of n names an element of one of kinds.
func (c *checker) points(n *node, what, a string, kinds ...string) {
	v := n.get(a)
	if k, ok := c.kind[v]; !ok || !slices.Contains(kinds, k) {
		c.errorf("%s %q: %s=%q does not name a %v (it names %q)", what, n.get("id"), a, v, kinds, k)
	}
}

// checkNet applies the rules; it returns every violation found.
func checkNet(net *node) []string {
	c := &checker{kind: map[string]string{}, owner: map[string]string{}}
	if net.XMLName.Local != "net" {
		c.errorf("root element is %q, not net", net.XMLName.Local)
	}
	c.require(net, "net", "qpme-version")
	last := -1
	for _, s := range net.Kids {
		i := slices.Index(netSections, s.XMLName.Local)
		if i <= last {
			c.errorf("net section %q out of the schema's order %v", s.XMLName.Local, netSections)
		}
		last = i
	}
	c.defineAll(net)
	c.checkColorsQueues(net)
	c.checkPlaces(net)
	c.checkTransitions(net)
	c.checkConnections(net)
	c.checkProbesMeta(net)
	return c.errs
}

// defineAll records every id first, so references may point forward.
func (c *checker) defineAll(net *node) {
	for _, n := range net.kids("colors", "color") {
		c.define(n, "color", "")
	}
	for _, n := range net.kids("queues", "queue") {
		c.define(n, "queue", "")
	}
	for _, p := range net.kids("places", "place") {
		c.define(p, "place", "")
		for _, r := range p.kids("color-refs", "color-ref") {
			c.define(r, "ref", p.get("id"))
		}
		for _, m := range p.kids("meta-attributes", "meta-attribute") {
			c.define(m, "meta", "")
		}
	}
	for _, t := range net.kids("transitions", "transition") {
		c.define(t, "transition", "")
		for _, m := range t.kids("modes", "mode") {
			c.define(m, "mode", t.get("id"))
		}
		for _, k := range t.kids("connections", "connection") {
			c.define(k, "incidence", "")
		}
	}
	for _, k := range net.kids("connections", "connection") {
		c.define(k, "connection", "")
	}
	for _, p := range net.kids("probes", "probe") {
		c.define(p, "probe", "")
		for _, r := range p.kids("color-refs", "color-ref") {
			c.define(r, "probe-ref", "")
		}
		for _, m := range p.kids("meta-attributes", "meta-attribute") {
			c.define(m, "meta", "")
		}
	}
	for _, m := range net.kids("meta-attributes", "meta-attribute") {
		c.define(m, "meta", "")
	}
}

func (c *checker) checkColorsQueues(net *node) {
	for _, n := range net.kids("colors", "color") {
		c.require(n, "color", "id", "name", "real-color")
	}
	for _, n := range net.kids("queues", "queue") {
		c.require(n, "queue", "id", "name", "number-of-servers", "strategy")
		c.enum(n, "queue", "strategy", strategies)
		if v, err := strconv.Atoi(n.get("number-of-servers")); err != nil || v < 1 {
			c.errorf("queue %q: number-of-servers=%q", n.get("id"), n.get("number-of-servers"))
		}
	}
}

func (c *checker) checkPlaces(net *node) {
	for _, p := range net.kids("places", "place") {
		c.require(p, "place", "id", "name", "departure-discipline", "type")
		c.enum(p, "place", "departure-discipline", []string{"NORMAL", "FIFO"})
		typ := p.get("type")
		c.enum(p, "place", "type", []string{"ordinary-place", "queueing-place", "subnet-place"})
		if typ == "queueing-place" {
			c.require(p, "queueing place", "queue-ref")
			c.points(p, "queueing place", "queue-ref", "queue")
		}
		for _, m := range p.kids("meta-attributes", "meta-attribute") {
			c.checkMeta(m)
		}
		want := map[string]string{"ordinary-place": "ordinary-color-reference", "queueing-place": "queueing-color-reference"}[typ]
		var colors []string
		for _, r := range p.kids("color-refs", "color-ref") {
			c.require(r, "color-ref", "id", "color-id", "type")
			c.points(r, "color-ref", "color-id", "color")
			if r.get("type") != want {
				c.errorf("color-ref %q of a %s has xsi:type %q, not %q", r.get("id"), typ, r.get("type"), want)
			}
			if slices.Contains(colors, r.get("color-id")) {
				c.errorf("place %q refers to colour %q twice", p.get("id"), r.get("color-id"))
			}
			colors = append(colors, r.get("color-id"))
			c.unsigned(r, "color-ref", "initial-population", "maximum-capacity")
			if want == "queueing-color-reference" {
				c.checkQueueingRef(r)
			}
		}
	}
}

func (c *checker) checkQueueingRef(r *node) {
	c.require(r, "queueing color-ref", "priority", "ranking", "distribution-function")
	c.unsigned(r, "queueing color-ref", "priority", "ranking")
	c.enum(r, "queueing color-ref", "distribution-function", distribution)
	switch r.get("distribution-function") {
	case "Exponential":
		if v, err := strconv.ParseFloat(r.get("lambda"), 64); err != nil || !(v > 0) {
			c.errorf("color-ref %q: Exponential needs lambda > 0, has %q", r.get("id"), r.get("lambda"))
		}
	case "Empirical":
		c.require(r, "Empirical color-ref", "pdf_filename", "scale", "offset")
	}
}

func (c *checker) checkMeta(m *node) {
	switch m.get("type") {
	case "location-attribute":
		c.require(m, "location-attribute", "location-x", "location-y")
	case "simqpn-place-configuration":
		c.require(m, "simqpn-place-configuration", "id", "configuration-name", "statsLevel")
	default:
		c.errorf("meta-attribute %q has unknown xsi:type %q", m.get("id"), m.get("type"))
	}
}

func (c *checker) checkTransitions(net *node) {
	for _, t := range net.kids("transitions", "transition") {
		c.require(t, "transition", "id", "name", "priority", "type")
		c.unsigned(t, "transition", "priority")
		c.enum(t, "transition", "type", []string{"immediate-transition", "timed-transition"})
		if t.get("type") == "immediate-transition" {
			c.require(t, "immediate transition", "weight")
		}
		for _, m := range t.kids("modes", "mode") {
			c.require(m, "mode", "id", "name", "real-color")
		}
		for _, k := range t.kids("connections", "connection") {
			c.require(k, "incidence connection", "id", "count", "source-id", "target-id")
			c.unsigned(k, "incidence connection", "count")
			c.points(k, "incidence connection", "source-id", "ref", "mode")
			c.points(k, "incidence connection", "target-id", "ref", "mode")
			c.incidence(net, t, k)
		}
	}
}

// incidence checks that an incidence connection joins a mode of its own
// transition and a colour reference of a place the net connects to that
// transition in the same direction.
func (c *checker) incidence(net *node, t, k *node) {
	src, dst := k.get("source-id"), k.get("target-id")
	mode, ref, input := dst, src, true
	if c.kind[src] == "mode" {
		mode, ref, input = src, dst, false
	}
	if c.kind[mode] != "mode" || c.owner[mode] != t.get("id") || c.kind[ref] != "ref" {
		c.errorf("incidence connection %q must join a mode of transition %q and a colour reference", k.get("id"), t.get("id"))
		return
	}
	from, to := c.owner[ref], t.get("id")
	if !input {
		from, to = to, from
	}
	if !slices.ContainsFunc(net.kids("connections", "connection"), func(n *node) bool {
		return n.get("source-id") == from && n.get("target-id") == to
	}) {
		c.errorf("incidence connection %q: no net connection %s → %s", k.get("id"), from, to)
	}
}

func (c *checker) checkConnections(net *node) {
	for _, k := range net.kids("connections", "connection") {
		c.require(k, "connection", "id", "source-id", "target-id")
		c.points(k, "connection", "source-id", "place", "transition")
		c.points(k, "connection", "target-id", "place", "transition")
		if c.kind[k.get("source-id")] == c.kind[k.get("target-id")] {
			c.errorf("connection %q joins two %ss", k.get("id"), c.kind[k.get("source-id")])
		}
	}
}

func (c *checker) checkProbesMeta(net *node) {
	for _, p := range net.kids("probes", "probe") {
		c.require(p, "probe", "id", "name", "start-place-id", "end-place-id", "start-trigger", "end-trigger")
		c.points(p, "probe", "start-place-id", "place")
		c.points(p, "probe", "end-place-id", "place")
		c.enum(p, "probe", "start-trigger", []string{"entry", "exit"})
		c.enum(p, "probe", "end-trigger", []string{"entry", "exit"})
		for _, r := range p.kids("color-refs", "color-ref") {
			c.require(r, "probe color-ref", "id", "color-id")
			c.points(r, "probe color-ref", "color-id", "color")
			if r.get("type") != "probe-color-reference" {
				c.errorf("probe color-ref %q has xsi:type %q", r.get("id"), r.get("type"))
			}
		}
	}
	for _, m := range net.kids("meta-attributes", "meta-attribute") {
		if m.get("type") == "simqpn-configuration" {
			c.require(m, "simqpn-configuration", simqpnConfigAttrs...)
			c.enum(m, "simqpn-configuration", "stopping-rule", []string{"ABSPRC", "RELPRC", "FIXEDLEN"})
			c.enum(m, "simqpn-configuration", "scenario", []string{"1", "2", "3"})
		}
	}
}
