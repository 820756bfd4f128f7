package qpme

import (
	"slices"
	"strconv"
	"testing"

	"github.com/brokertrace/brokertrace/recfile"
)

// game plays the exported net's token game without time: queueing places
// hand their tokens on at once. It reads only the XML — initial
// populations, modes and incidence counts — so it checks the wiring the
// file describes, not the exporter's intentions.
type game struct {
	tokens map[string]map[string]int // place id → colour id → count
	trans  []gameTrans
	fired  map[string]int
}

type gameTrans struct {
	name     string
	priority int
	modes    [][]arc
}

type arc struct {
	place, color string
	count        int // negative: taken
}

func newGame(t *testing.T, net *node) *game {
	t.Helper()
	g := &game{tokens: map[string]map[string]int{}, fired: map[string]int{}}
	refs := map[string]arc{}
	for _, p := range net.kids("places", "place") {
		g.tokens[p.get("id")] = map[string]int{}
		for _, r := range p.kids("color-refs", "color-ref") {
			n, _ := strconv.Atoi(r.get("initial-population"))
			g.tokens[p.get("id")][r.get("color-id")] = n
			refs[r.get("id")] = arc{place: p.get("id"), color: r.get("color-id")}
		}
	}
	for _, tr := range net.kids("transitions", "transition") {
		prio, _ := strconv.Atoi(tr.get("priority"))
		gt := gameTrans{name: tr.get("name"), priority: prio}
		for _, m := range tr.kids("modes", "mode") {
			var arcs []arc
			for _, k := range tr.kids("connections", "connection") {
				n, _ := strconv.Atoi(k.get("count"))
				if k.get("target-id") == m.get("id") {
					a := refs[k.get("source-id")]
					arcs = append(arcs, arc{a.place, a.color, -n})
				} else if k.get("source-id") == m.get("id") {
					a := refs[k.get("target-id")]
					arcs = append(arcs, arc{a.place, a.color, n})
				}
			}
			gt.modes = append(gt.modes, arcs)
		}
		g.trans = append(g.trans, gt)
	}
	slices.SortStableFunc(g.trans, func(a, b gameTrans) int { return b.priority - a.priority })
	return g
}

func (g *game) enabled(arcs []arc) bool {
	for _, a := range arcs {
		if a.count < 0 && g.tokens[a.place][a.color] < -a.count {
			return false
		}
	}
	return true
}

func (g *game) apply(name string, arcs []arc) {
	for _, a := range arcs {
		if a.count < 0 {
			g.tokens[a.place][a.color] += a.count
		}
	}
	for _, a := range arcs {
		if a.count > 0 {
			g.tokens[a.place][a.color] += a.count
		}
	}
	g.fired[name]++
}

// fire fires the named transition's first enabled mode.
func (g *game) fire(t *testing.T, name string) {
	t.Helper()
	for _, tr := range g.trans {
		if tr.name != name {
			continue
		}
		for _, m := range tr.modes {
			if g.enabled(m) {
				g.apply(name, m)
				return
			}
		}
	}
	t.Fatalf("transition %s is not enabled", name)
}

// settle fires every enabled transition but skip, highest priority first,
// until none is enabled.
func (g *game) settle(t *testing.T, skip string) {
	for steps := 0; steps < 10000; steps++ {
		fired := false
		for _, tr := range g.trans {
			if tr.name == skip {
				continue
			}
			if i := slices.IndexFunc(tr.modes, g.enabled); i >= 0 {
				g.apply(tr.name, tr.modes[i])
				fired = true
				break // priorities: start again from the top
			}
		}
		if !fired {
			return
		}
	}
	t.Fatal("the net never settles")
}

// TestTokenGame sends 10 messages through the net: each is accepted,
// processed, dispatched and departs; storage is freed (by the ack when
// there are acks); the collector runs once per 3 messages' garbage.
func TestTokenGame(t *testing.T) {
	for _, acks := range []bool{false, true} {
		cal, fsys := fixture(acks)
		net, _ := export(t, cal, Options{Rate: 1000, Demands: fsys})
		g := newGame(t, net)
		for range 10 {
			g.fire(t, "arrive")
			g.settle(t, "arrive")
		}
		want := map[string]int{"arrive": 10, "accept": 10, "to-process": 10, "to-dispatch": 10, "sent": 10,
			"departed": 10, "gc-start": 3, "gc-end": 3}
		if acks {
			want["accept"], want["acked"] = 20, 10 // messages and acks both pass accept
		}
		for name, n := range want {
			if g.fired[name] != n {
				t.Errorf("acks=%v: %s fired %d times, want %d", acks, name, g.fired[name], n)
			}
		}
		left := map[[2]string]int{{"_p_queue", "_c_msg"}: 0, {"_p_input", "_c_msg"}: 0,
			{"_p_gc-idle", "_c_garbage"}: 1, {"_p_gc-idle", "_c_collector"}: 1, {"_p_arrivals", "_c_arrival"}: 1}
		for k, n := range left {
			if got := g.tokens[k[0]][k[1]]; got != n {
				t.Errorf("acks=%v: %s holds %d %s tokens at the end, want %d", acks, k[0], got, k[1], n)
			}
		}
	}
}

// TestTokenGameShortChain: a broker with no "between" thread and no
// system demand — accept-msg hands straight to dispatch, sent is the end.
func TestTokenGameShortChain(t *testing.T) {
	cal, fsys := fixture(false)
	cal.Stages = slices.DeleteFunc(cal.Stages, func(s recfile.CalStage) bool { return s.Name == "process" })
	cal.Stages[len(cal.Stages)-1].MeanNs = 0 // system
	net, _ := export(t, cal, Options{Rate: 1000, Demands: fsys})
	for _, e := range checkNet(net) {
		t.Error(e)
	}
	g := newGame(t, net)
	for range 4 {
		g.fire(t, "arrive")
		g.settle(t, "arrive")
	}
	for name, n := range map[string]int{"accept": 4, "to-process": 0, "to-dispatch": 4, "sent": 4, "departed": 0, "gc-start": 1} {
		if g.fired[name] != n {
			t.Errorf("%s fired %d times, want %d", name, g.fired[name], n)
		}
	}
	if got := names(net.kids("places", "place")); slices.Contains(got, "process") || slices.Contains(got, "system") {
		t.Errorf("places %v: process and system should be left out", got)
	}
}
