package cluster

import (
	"errors"
	"fmt"

	"github.com/brokertrace/brokertrace/clocksync"
	"github.com/brokertrace/brokertrace/recfile"
)

// clockOf says which recordings share CLOCK_MONOTONIC: those of one boot
// of one kernel. Recordings made before the boot id was kept fall back to
// the hostname.
func (n *node) clockOf() string {
	if n.bootID != "" {
		return n.bootID
	}
	return "host " + n.host
}

// alignClocks brings every recording's times to the clock of the first
// recording: the recordings of another host are mapped through the clock
// offset and drift estimated from the TCP segments that a recording
// already on the reference clock and one on that host both captured,
// taken over a connection between them (a route). A host none of whose
// recordings shares such a connection with an aligned one cannot be
// joined.
func (j *joiner) alignClocks() error {
	mapTo := map[string]func(int64) int64{j.nodes[0].clockOf(): func(t int64) int64 { return t }}
	j.sum.Clocks = []recfile.ClusterClock{j.clockEntry(0, nil, "")}
	var lastErr error
	for progress := true; progress; {
		progress = false
		for b, nb := range j.nodes {
			if mapTo[nb.clockOf()] != nil {
				continue
			}
			for a, na := range j.nodes {
				toRef := mapTo[na.clockOf()]
				if toRef == nil || !j.linked(a, b) {
					continue
				}
				est, err := clocksync.EstimateDirs(na.dir, nb.dir)
				if err != nil {
					lastErr = fmt.Errorf("%s and %s: %w", na.name, nb.name, err)
					continue
				}
				mapTo[nb.clockOf()] = func(t int64) int64 { return toRef(est.ToA(t)) }
				j.sum.Clocks = append(j.sum.Clocks, j.clockEntry(b, &est, na.name))
				progress = true
				break
			}
		}
	}
	for _, n := range j.nodes {
		f := mapTo[n.clockOf()]
		if f == nil {
			return inputErrorf("%s (%s) was recorded on another host than %s and its clock could not be related to theirs: record each node with --pcap FILE so that the segments of the routes between them are captured at both ends (%v)",
				n.name, n.dir, j.nodes[0].name, cmpErr(lastErr))
		}
		if n.clockOf() == j.nodes[0].clockOf() {
			continue
		}
		for k := range n.rows {
			n.rows[k].TIn, n.rows[k].TOut = f(n.rows[k].TIn), f(n.rows[k].TOut)
		}
	}
	return nil
}

func cmpErr(err error) error {
	if err == nil {
		return errors.New("no recording on the reference clock shares a connection with it")
	}
	return err
}

// linked reports whether nodes a and b hold the two ends of a connection.
func (j *joiner) linked(a, b int) bool {
	for _, c := range j.nodes[b].conns {
		if p, ok := j.owner[connKey{c.remote, c.local}]; ok && p == a {
			return true
		}
	}
	return false
}

// clockEntry describes node i's clock in cluster.json: the reference, or
// its estimate against node via.
func (j *joiner) clockEntry(i int, est *clocksync.Estimate, via string) recfile.ClusterClock {
	n := j.nodes[i]
	c := recfile.ClusterClock{Host: n.host, BootID: n.bootID, Reference: est == nil}
	for _, m := range j.nodes {
		if m.clockOf() == n.clockOf() {
			c.Nodes = append(c.Nodes, m.name)
		}
	}
	if est != nil {
		c.Via = via + " – " + n.name
		c.OffsetNs, c.DriftPPM, c.UncertaintyNs = est.OffsetNs, est.DriftPPM, est.UncertaintyNs
		c.SegmentsForward, c.SegmentsReverse, c.Warnings = est.Forward, est.Reverse, est.Warnings
	}
	return c
}
