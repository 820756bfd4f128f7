package overhead

import (
	"fmt"
	"math"
	"slices"

	"github.com/brokertrace/brokertrace/recfile"
)

// aggregate computes each configuration's statistics over its runs; lat
// holds each configuration's latencies pooled over its runs.
func aggregate(cs []Config, runs []recfile.OverheadRun, lat map[string][]float64) []recfile.OverheadConfig {
	out := make([]recfile.OverheadConfig, 0, len(cs))
	for _, c := range cs {
		mine := slices.DeleteFunc(slices.Clone(runs), func(r recfile.OverheadRun) bool { return r.Config != c.Name })
		all := len(mine)
		mine = slices.DeleteFunc(mine, func(r recfile.OverheadRun) bool { return r.Error != "" })
		oc := recfile.OverheadConfig{
			Name: c.Name, Description: c.Description, Runs: len(mine), Failed: all - len(mine),
			Throughput:   Summarize(field(mine, func(r recfile.OverheadRun) float64 { return r.ThroughputPerSec })),
			Latency:      Summarize(lat[c.Name]),
			LatencyRuns:  Summarize(field(mine, func(r recfile.OverheadRun) float64 { return r.LatencyMedian })),
			TracerCPUPct: Summarize(field(mine, func(r recfile.OverheadRun) float64 { return r.TracerCPUPct })),
			CPUTracerPct: Summarize(cpuPcts(mine)),
			Progs:        sumProgs(mine),
		}
		for _, r := range mine {
			oc.TracerMaxRSSBytes = max(oc.TracerMaxRSSBytes, r.TracerMaxRSSBytes)
			oc.Dropped += r.Dropped
			if r.MatchedShare != nil && (oc.MatchedShare == nil || *r.MatchedShare < *oc.MatchedShare) {
				oc.MatchedShare = ptr(*r.MatchedShare)
			}
		}
		out = append(out, oc)
	}
	relativeToT(out)
	paired(out, runs)
	return out
}

// paired sets each traced configuration's paired statistics: each of its
// runs against T's run of the same round.
func paired(cs []recfile.OverheadConfig, runs []recfile.OverheadRun) {
	t := map[int]recfile.OverheadRun{}
	for _, r := range runs {
		if r.Config == ConfT && r.Error == "" && r.ThroughputPerSec > 0 {
			t[r.Run] = r
		}
	}
	for j := range cs {
		if cs[j].Name == ConfT || len(t) == 0 {
			continue
		}
		var ratios, added []float64
		for _, r := range runs {
			b, ok := t[r.Run]
			if r.Config != cs[j].Name || r.Error != "" || !ok {
				continue
			}
			ratios = append(ratios, r.ThroughputPerSec/b.ThroughputPerSec)
			if r.LatencyMedian > 0 && b.LatencyMedian > 0 {
				added = append(added, r.LatencyMedian-b.LatencyMedian)
			}
		}
		cs[j].RatioPaired, cs[j].LatencyAddedPaired = Summarize(ratios), Summarize(added)
	}
}

// converged says whether every traced configuration's paired CIs meet the
// goals (a goal of 0 is none), names the CI widest against its goal, and
// says how many times its goal it is (+Inf with fewer than two rounds).
func converged(cs []recfile.OverheadConfig, ratioCI, latencyCINs float64) (ok bool, widest string, worst float64) {
	ok, worst = true, -1.0
	for _, c := range cs {
		if c.Name == ConfT {
			continue
		}
		for _, g := range []struct {
			what   string
			s      recfile.OverheadStats
			goal   float64
			scale  float64 // of the CI's full width: ½ for a ± half-width
			format string
		}{
			{"throughput ratio", c.RatioPaired, ratioCI, 0.5, "±%.4f (goal ±%.4f)"},
			{"added latency", c.LatencyAddedPaired, latencyCINs, 1, "%.0f ns wide (goal %.0f ns)"},
		} {
			if g.goal <= 0 {
				continue
			}
			if g.s.CI95High == nil {
				return false, fmt.Sprintf("%s %s: fewer than 2 paired runs", c.Name, g.what), math.Inf(1)
			}
			w := (*g.s.CI95High - *g.s.CI95Low) * g.scale
			ok = ok && w <= g.goal
			if w/g.goal > worst {
				worst, widest = w/g.goal, fmt.Sprintf("%s %s "+g.format, c.Name, g.what, w, g.goal)
			}
		}
	}
	return ok, widest, worst
}

// relativeToT sets each configuration's throughput ratio and added median
// latency against T, when T ran.
func relativeToT(cs []recfile.OverheadConfig) {
	i := slices.IndexFunc(cs, func(c recfile.OverheadConfig) bool { return c.Name == ConfT })
	if i < 0 || cs[i].Throughput.N == 0 {
		return
	}
	t := cs[i]
	for j := range cs {
		cs[j].ThroughputRatio = ptr(cs[j].Throughput.Mean / t.Throughput.Mean)
		cs[j].LatencyAddedNs = ptr(cs[j].Latency.Median - t.Latency.Median)
	}
}

// cpuPcts are the runs' tracer CPU over the CPU phase, where measured.
func cpuPcts(runs []recfile.OverheadRun) []float64 {
	var xs []float64
	for _, r := range runs {
		if r.CPUTracerPct != nil {
			xs = append(xs, *r.CPUTracerPct)
		}
	}
	return xs
}

// field is one value of every run.
func field(runs []recfile.OverheadRun, f func(recfile.OverheadRun) float64) []float64 {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	return xs
}
