package cluster

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/brokertrace/brokertrace/recfile"
)

// WriteText prints the join's summary: what was joined, what could not
// be and why, and per path a table of its hops.
func WriteText(w io.Writer, s *recfile.ClusterSummary) error {
	names := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		names[i] = fmt.Sprintf("%s (%d rows)", n.Name, n.Rows)
	}
	fmt.Fprintf(w, "joined %d recordings: %s\n", len(s.Nodes), strings.Join(names, ", "))
	share := 0.0
	if s.Deliveries > 0 {
		share = 100 * float64(s.FullPaths) / float64(s.Deliveries)
	}
	fmt.Fprintf(w, "%d deliveries to clients, %d (%.2f%%) with their whole path; broken %d, unplaced %d, from unrecorded nodes %d; %d copies to unrecorded nodes; %d ambiguous hops\n",
		s.Deliveries, s.FullPaths, share, s.Broken, s.Unplaced, s.FromUnrecorded, s.ToUnrecorded, s.Ambiguous)
	for _, p := range s.Paths {
		fmt.Fprintf(w, "\npath %s: %d deliveries, in the cluster %s\n", strings.Join(p.Nodes, " → "), p.Deliveries, quantiles(p.Broker))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "hop\tnode\troute before it p50 / p90 / p99\tin the broker p50 / p90 / p99\tctxsw\ton-CPU\t")
		for h, hs := range p.Hops {
			route := "-"
			if hs.Net != nil {
				route = quantiles(*hs.Net)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t\n", h+1, hs.Node, route, quantiles(hs.Latency), meanOr(hs.CtxswMean, "%.2f"), meanDur(hs.OnCPUMeanNs))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func quantiles(s recfile.LatencyStats) string {
	d := func(ns int64) string { return time.Duration(ns).Round(100 * time.Nanosecond).String() }
	return fmt.Sprintf("%s / %s / %s", d(s.P50Ns), d(s.P90Ns), d(s.P99Ns))
}

func meanOr(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

func meanDur(v *float64) string {
	if v == nil {
		return "-"
	}
	return time.Duration(*v).Round(100 * time.Nanosecond).String()
}
