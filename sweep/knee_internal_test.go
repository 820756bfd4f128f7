package sweep

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// simulate runs the knee search against a broker that passes at most
// capacity msg/s, from the steps given on, and returns every step.
func simulate(o recfile.SweepOptions, capacity float64, steps []recfile.SweepStep) []recfile.SweepStep {
	return simulateStalls(o, capacity, steps, nil)
}

// simulateStalls is simulate with stalls: the first stalls[r] steps at
// rate r fall 10% behind with neither CPU full, as a passing stall of
// the host (or a lock) makes them.
func simulateStalls(o recfile.SweepOptions, capacity float64, steps []recfile.SweepStep, stalls map[float64]int) []recfile.SweepStep {
	for next := nextSearch(o, steps); next != nil; next = nextSearch(o, steps) {
		for _, st := range next {
			st.Status, st.RateAchieved = recfile.SweepDone, min(st.RateAsked, capacity)
			st.Saturated = st.RateAchieved < o.Behind*st.RateAsked
			if st.Saturated {
				st.Bottleneck = recfile.BottleneckBroker
			}
			seen := len(slices.DeleteFunc(slices.Clone(steps), func(s recfile.SweepStep) bool {
				return s.RateAsked != st.RateAsked || s.Pattern != st.Pattern
			}))
			if !st.Saturated && seen < stalls[st.RateAsked] {
				st.RateAchieved, st.Saturated, st.Bottleneck = 0.9*st.RateAsked, true, recfile.BottleneckNeither
			}
			steps = append(steps, st)
		}
	}
	return steps
}

// TestKneeConfirm: a step that falls behind with neither CPU full is
// repeated once, and the repeat decides its rate: a passing stall below
// the knee no longer ends the search there, and a rate that stalls every
// time is the knee after one repeat.
func TestKneeConfirm(t *testing.T) {
	o := recfile.SweepOptions{Search: true, From: 1000, Factor: 2, Refine: 3, Behind: 0.95, Pattern: PatternBoth, Burst: 10}
	clean := simulate(o, 3500, nil) // 1000, 2000, 4000 (saturated), 3000, 3500, 3750
	stalled := simulateStalls(o, 3500, nil, map[float64]int{3000: 1})
	strip := func(steps []recfile.SweepStep) []float64 {
		var r []float64
		for _, s := range lead(o, steps) {
			if s.Phase != recfile.SweepConfirm {
				r = append(r, s.RateAsked)
			}
		}
		return r
	}
	if got, want := strip(stalled), strip(clean); !slices.Equal(got, want) {
		t.Errorf("a stall once at 3000 msg/s: rates %v, want %v and a repeat of 3000", got, want)
	}
	confirms := slices.DeleteFunc(slices.Clone(stalled), func(s recfile.SweepStep) bool { return s.Phase != recfile.SweepConfirm })
	if len(confirms) != 2 || confirms[0].RateAsked != 3000 || confirms[0].Pattern != PatternRegular || confirms[1].Pattern != PatternBursty {
		t.Fatalf("confirm steps %+v: want 3000 msg/s again, regular then bursty", confirms)
	}
	k, kc := knee(o, stalled), knee(o, clean)
	if stalled[*k.Unsaturated].RateAsked != clean[*kc.Unsaturated].RateAsked || !strings.Contains(k.Note, "step-06-regular-3000 fell behind and its repeat did not") {
		t.Errorf("knee %+v, want %+v's rates and the overruled step named", k, kc)
	}
	for cut := range len(stalled) {
		if again := simulateStalls(o, 3500, slices.Clone(stalled[:cut]), map[float64]int{3000: 1}); !slices.EqualFunc(again, stalled, func(a, b recfile.SweepStep) bool {
			return a.Dir == b.Dir && a.Phase == b.Phase
		}) {
			t.Fatalf("resumed after %d steps: a different search", cut)
		}
	}
	// A rate that stalls every time: one repeat, then it is the knee.
	stuck := simulateStalls(o, 3500, nil, map[float64]int{3000: 99})
	k = knee(o, stuck)
	if hi := stuck[*k.Saturated]; hi.RateAsked != 3000 || hi.Phase != recfile.SweepConfirm || countPhase(lead(o, stuck), recfile.SweepConfirm) != 1 ||
		!strings.Contains(k.Note, "again when repeated") {
		t.Errorf("a rate stalled every time: knee %+v (saturated step %+v), want 3000 msg/s confirmed once", k, hi)
	}
}

// TestKneeSearch checks the search's choices against brokers of known
// capacity: it climbs by the factor, brackets the capacity, refines at
// most Refine times, pairs the patterns, and resumes as it would have
// gone on.
func TestKneeSearch(t *testing.T) {
	for _, c := range []struct {
		pattern  string
		from     float64
		capacity float64
	}{{PatternRegular, 1000, 37000}, {PatternBoth, 20000, 500000}, {PatternRegular, 8000, 3000}, {PatternRegular, 1000, 1e12}} {
		t.Run(fmt.Sprintf("%s-%g-%g", c.pattern, c.from, c.capacity), func(t *testing.T) {
			o := recfile.SweepOptions{Search: true, From: c.from, Factor: 2, Refine: 3, Behind: 0.95, Pattern: c.pattern, Burst: 10}
			steps := simulate(o, c.capacity, nil)
			for i := range steps {
				if steps[i].Index != i || steps[i].Dir != stepDir(i, steps[i].Pattern, steps[i].RateAsked) {
					t.Fatalf("step %d: index %d dir %s", i, steps[i].Index, steps[i].Dir)
				}
			}
			k := knee(o, steps)
			if c.capacity > 1e9 {
				if k.Found || len(steps) != maxClimb {
					t.Fatalf("an endless broker: %d steps, knee %+v; want the climb to stop after %d", len(steps), k, maxClimb)
				}
				return
			}
			if !k.Found {
				t.Fatalf("no knee: %+v", k)
			}
			lo, hi := steps[*k.Unsaturated], steps[*k.Saturated]
			if !(lo.RateAsked <= c.capacity/o.Behind && hi.RateAsked > c.capacity/o.Behind) || (hi.RateAsked-lo.RateAsked)/lo.RateAsked > 1.0/8+1e-9 {
				t.Errorf("bracket %.0f–%.0f for capacity %.0f", lo.RateAsked, hi.RateAsked, c.capacity)
			}
			if n := countPhase(lead(o, steps), recfile.SweepRefine); n == 0 || n > o.Refine {
				t.Errorf("%d refinements", n)
			}
			if c.pattern == PatternBoth {
				for i := 0; i < len(steps); i += 2 {
					if steps[i].Pattern != PatternRegular || steps[i+1].Pattern != PatternBursty || steps[i+1].RateAsked != steps[i].RateAsked || steps[i+1].Phase != steps[i].Phase {
						t.Fatalf("steps %d, %d: %+v, %+v: want regular then bursty at one rate", i, i+1, steps[i], steps[i+1])
					}
				}
			}
			for cut := range len(steps) {
				// Interrupted after cut steps: the same steps follow.
				if again := simulate(o, c.capacity, slices.Clone(steps[:cut])); !slices.EqualFunc(again, steps, func(a, b recfile.SweepStep) bool {
					return a.Dir == b.Dir && a.Phase == b.Phase
				}) {
					t.Fatalf("resumed after %d steps: a different search", cut)
				}
			}
		})
	}
}

// TestKneeNotes: a knee search that saturates at once descends, and the
// note of a ladder that never saturated says where to look.
func TestKneeNotes(t *testing.T) {
	o := recfile.SweepOptions{Search: true, From: 8000, Factor: 2, Refine: 3, Behind: 0.95, Pattern: PatternRegular}
	steps := simulate(o, 3000, nil)
	if steps[1].RateAsked != 4000 || steps[1].Phase != recfile.SweepSearch {
		t.Errorf("after a saturated first step: %+v, want 4000 msg/s, search", steps[1])
	}
	ladder := recfile.SweepOptions{Pattern: PatternRegular, Behind: 0.95}
	k := knee(ladder, []recfile.SweepStep{{Index: 0, Dir: "step-00-regular-100", Pattern: PatternRegular, RateAsked: 100, RateAchieved: 100, Status: recfile.SweepDone}})
	if k.Found || k.Saturated != nil || *k.Unsaturated != 0 || math.Abs(k.Rate-100) > 0 {
		t.Errorf("unsaturated ladder: %+v", k)
	}
}

// TestResumeSearch: an interrupted knee search keeps its done steps with
// complete files, up to the first that is not, drops the rest and their
// directories, and then chooses the same next rate as before.
func TestResumeSearch(t *testing.T) {
	dir := t.TempDir()
	o := recfile.SweepOptions{Search: true, From: 1000, Factor: 2, Refine: 3, Behind: 0.95, Pattern: PatternRegular}
	steps := simulate(o, 3500, nil) // 1000, 2000, 4000 (saturated), 3000, 3500, …
	out, err := outdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	for i, st := range steps {
		d, err := out.Sub(st.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if i != 3 { // step 3's files are incomplete: the search resumes there
			must(t, recfile.WriteJSON(d, recfile.MetaFile, &recfile.Meta{}, outdir.FilePerm))
		}
		must(t, recfile.WriteJSON(d, recfile.LoadJSONFile, &recfile.LoadSummary{}, outdir.FilePerm))
		d.Close()
	}
	must(t, recfile.WriteJSON(out, recfile.SweepFile, &recfile.Sweep{Options: o, Steps: steps, Runs: 1}, outdir.SecretPerm))
	sw, err := resume(Config{Out: dir, Options: o}, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Steps) != 3 || sw.Runs != 2 {
		t.Fatalf("resumed with %d steps, run %d; want the 3 before the incomplete one, run 2", len(sw.Steps), sw.Runs)
	}
	for _, st := range steps[3:] {
		if _, err := os.Stat(filepath.Join(dir, st.Dir)); !os.IsNotExist(err) {
			t.Errorf("%s kept (%v): want it removed", st.Dir, err)
		}
	}
	if next := nextSearch(o, sw.Steps); len(next) != 1 || next[0].Dir != steps[3].Dir {
		t.Errorf("next %+v, want %s again", next, steps[3].Dir)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestBottleneck: whose CPU a saturated step found full, against the
// broker's CPUs, its quota and the load's CPUs.
func TestBottleneck(t *testing.T) {
	o := recfile.SweepOptions{BrokerCPUs: "0", LoadCPUs: "1"}
	quota := o
	quota.CPUQuota = 0.25
	free := recfile.SweepOptions{}
	for _, c := range []struct {
		o      recfile.SweepOptions
		sat    bool
		broker float64
		want   string
		busy   float64
	}{
		{o, false, 1, "", 1},
		{o, true, 0.95, recfile.BottleneckBroker, 1},
		{o, true, 0.9, recfile.BottleneckLoad, 1}, // nats-server's step 21 of 2026-11-28
		{o, true, 0.89, recfile.BottleneckLoad, 0.9},
		{o, true, 0.94, recfile.BottleneckNeither, 0.89},
		{quota, true, 0.23, recfile.BottleneckBroker, 1},
		{quota, true, 0.2, recfile.BottleneckLoad, 1},
		{free, true, 1.8, recfile.BottleneckNeither, 1}, // two CPUs: not full, and no load CPUs given
		{free, true, 1.9, recfile.BottleneckBroker, 0},
	} {
		st := recfile.SweepStep{Saturated: c.sat, BrokerUtil: c.broker, LoadCPUsBusy: c.busy}
		got, err := bottleneck(&st, c.o, 2)
		if err != nil || got != c.want {
			t.Errorf("%+v, broker %.2f, load busy %.2f: %q, %v; want %q", c.o, c.broker, c.busy, got, err, c.want)
		}
	}
}
