package overhead

import (
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
	return out
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
