package cluster

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/brokertrace/brokertrace/recfile"
)

// pathTimes gathers one path shape's times over its deliveries.
type pathTimes struct {
	nodes      []string
	broker     []int64
	latency    [][]int64 // per hop
	net        [][]int64 // per hop; hop 0 empty
	ctxsw      []float64 // sums per hop
	ctxswN     []int64
	oncpu      []float64
	oncpuN     []int64
	deliveries int64
}

// pathStats summarises hops.csv's rows per path: the nodes a delivery
// crossed, in order. Rows come grouped by delivery, hop 1 first. The
// paths are ordered by how many deliveries took them.
func pathStats(rows []recfile.HopRow) []recfile.ClusterPath {
	byKey := map[string]*pathTimes{}
	for start := 0; start < len(rows); start += int(rows[start].Hops) {
		p := rows[start : start+int(rows[start].Hops)]
		names := make([]string, len(p))
		for h, r := range p {
			names[h] = r.Node
		}
		key := strings.Join(names, "\x00")
		pt := byKey[key]
		if pt == nil {
			n := len(p)
			pt = &pathTimes{nodes: names, latency: make([][]int64, n), net: make([][]int64, n),
				ctxsw: make([]float64, n), ctxswN: make([]int64, n), oncpu: make([]float64, n), oncpuN: make([]int64, n)}
			byKey[key] = pt
		}
		pt.add(p)
	}
	out := make([]recfile.ClusterPath, 0, len(byKey))
	for _, pt := range byKey {
		out = append(out, pt.summary())
	}
	slices.SortFunc(out, func(a, b recfile.ClusterPath) int {
		return cmp.Or(cmp.Compare(b.Deliveries, a.Deliveries), slices.Compare(a.Nodes, b.Nodes))
	})
	return out
}

func (pt *pathTimes) add(p []recfile.HopRow) {
	pt.deliveries++
	pt.broker = append(pt.broker, p[len(p)-1].TOut-p[0].TIn)
	for h, r := range p {
		pt.latency[h] = append(pt.latency[h], r.Latency)
		if r.NetNs != nil {
			pt.net[h] = append(pt.net[h], *r.NetNs)
		}
		if r.Ctxsw != nil {
			pt.ctxsw[h] += float64(*r.Ctxsw)
			pt.ctxswN[h]++
		}
		if r.OnCPU != nil {
			pt.oncpu[h] += float64(*r.OnCPU)
			pt.oncpuN[h]++
		}
	}
}

func (pt *pathTimes) summary() recfile.ClusterPath {
	cp := recfile.ClusterPath{Nodes: pt.nodes, Deliveries: pt.deliveries, Broker: latencyStats(pt.broker)}
	for h, name := range pt.nodes {
		hs := recfile.ClusterHopStats{Node: name, Latency: latencyStats(pt.latency[h])}
		if len(pt.net[h]) > 0 {
			s := latencyStats(pt.net[h])
			hs.Net = &s
		}
		hs.CtxswMean = mean(pt.ctxsw[h], pt.ctxswN[h])
		hs.OnCPUMeanNs = mean(pt.oncpu[h], pt.oncpuN[h])
		cp.Hops = append(cp.Hops, hs)
	}
	return cp
}

func mean(sum float64, n int64) *float64 {
	if n == 0 {
		return nil
	}
	m := sum / float64(n)
	return &m
}

// latencyStats are exact nearest-rank percentiles of vs, which it sorts.
func latencyStats(vs []int64) recfile.LatencyStats {
	if len(vs) == 0 {
		return recfile.LatencyStats{}
	}
	slices.Sort(vs)
	q := func(p float64) int64 {
		k := int(math.Ceil(p*float64(len(vs)))) - 1
		return vs[min(max(k, 0), len(vs)-1)]
	}
	var sum float64
	for _, v := range vs {
		sum += float64(v)
	}
	return recfile.LatencyStats{Count: int64(len(vs)), MinNs: vs[0], P50Ns: q(0.5), P90Ns: q(0.9), P99Ns: q(0.99),
		P999Ns: q(0.999), MaxNs: vs[len(vs)-1], MeanNs: sum / float64(len(vs))}
}
