package overhead

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/brokertrace/brokertrace/recfile"
)

// tableHeader are the columns of the result table.
var tableHeader = []string{"config", "throughput msg/s (95% CI)", "vs T", "latency median µs (Q1–Q3)", "added µs", "tracer CPU % of a core", "tracer peak RSS MB", "dropped", "copies matched"}

// rows are the table's cells, one row per configuration.
func rows(res *recfile.Overhead) [][]string {
	out := make([][]string, 0, len(res.Configs))
	for _, c := range res.Configs {
		traced := c.Name != ConfT
		name := c.Name
		if c.Failed > 0 {
			name = fmt.Sprintf("%s (%d of %d runs failed)", c.Name, c.Failed, c.Failed+c.Runs)
		}
		out = append(out, []string{
			name,
			fmt.Sprintf("%.0f %s", c.Throughput.Mean, ci(c.Throughput, 1)),
			optional(c.ThroughputRatio, "%.3f", 1),
			fmt.Sprintf("%.1f (%.1f–%.1f)", c.Latency.Median/1e3, c.Latency.Q1/1e3, c.Latency.Q3/1e3),
			optional(c.LatencyAddedNs, "%+.1f", 1e-3),
			when(traced, fmt.Sprintf("%.1f %s", c.TracerCPUPct.Mean, ci(c.TracerCPUPct, 1))),
			when(traced, fmt.Sprintf("%.0f", float64(c.TracerMaxRSSBytes)/1e6)),
			when(traced, fmt.Sprint(c.Dropped)),
			optional(c.MatchedShare, "%.2f%%", 100),
		})
	}
	return out
}

// ci is a statistic's 95% confidence interval of the mean, as ±half-width.
func ci(s recfile.OverheadStats, scale float64) string {
	if s.CI95High == nil {
		return ""
	}
	return fmt.Sprintf("±%.*f", precision(s.Mean), (*s.CI95High-s.Mean)*scale)
}

func precision(v float64) int {
	if v >= 100 {
		return 0
	}
	return 1
}

func optional(v *float64, format string, scale float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf(format, *v*scale)
}

func when(ok bool, s string) string {
	if !ok {
		return "–"
	}
	return s
}

// WriteTable prints the result as an aligned text table, or as Markdown
// for the README, followed by the machine it was measured on.
func WriteTable(w io.Writer, res *recfile.Overhead, markdown bool) error {
	var b strings.Builder
	if markdown {
		line := func(cells []string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
		line(tableHeader)
		line(strings.Split(strings.Repeat("---,", len(tableHeader)-1)+"---", ","))
		for _, r := range rows(res) {
			line(r)
		}
	} else {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, r := range append([][]string{tableHeader}, rows(res)...) {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		tw.Flush()
	}
	fmt.Fprintf(&b, "\n%s\n", machine(res))
	_, err := io.WriteString(w, b.String())
	return err
}

// machine says what and where was measured, in one line.
func machine(res *recfile.Overhead) string {
	o := res.Options
	return fmt.Sprintf("%s, %d runs per configuration (fresh broker each), %d B messages: saturation %d messages after %d warm-up; latency at %.0f msg/s for %v (first %v left out). Broker on CPU %s, load on CPU %s. %s, %d CPUs, Linux %s, %s.",
		res.Broker, o.Runs, o.Size, o.Count, o.WarmupCount, o.Rate, time.Duration(o.LatencyNs), time.Duration(o.LatencyWarmNs),
		o.BrokerCPUs, o.LoadCPUs, res.CPUModel, res.Host.CPUs, res.Host.Kernel, res.StartWall)
}
