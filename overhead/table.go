package overhead

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/brokertrace/brokertrace/recfile"
)

// tableHeader are the columns of the result table.
func tableHeader(res *recfile.Overhead) []string {
	return []string{"config", "throughput msg/s (95% CI)", "vs T, paired (95% CI)", "latency median µs (Q1–Q3)", "added µs, paired (95% CI)",
		"tracer CPU % of a core, whole run", fmt.Sprintf("tracer CPU %% at %.0f msg/s", res.Options.CPURate),
		"tracer peak RSS MB", "dropped", "copies matched"}
}

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
			relative(c.RatioPaired, c.ThroughputRatio, "%.3f", 1),
			fmt.Sprintf("%.1f (%.1f–%.1f)", c.Latency.Median/1e3, c.Latency.Q1/1e3, c.Latency.Q3/1e3),
			relative(c.LatencyAddedPaired, c.LatencyAddedNs, "%+.1f", 1e-3),
			when(traced, fmt.Sprintf("%.1f %s", c.TracerCPUPct.Mean, ci(c.TracerCPUPct, 1))),
			when(c.CPUTracerPct.N > 0, fmt.Sprintf("%.2f %s", c.CPUTracerPct.Mean, ci(c.CPUTracerPct, 1))),
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

// relative is a figure against T: the mean of the paired per-round values
// with its CI's half-width, in format without its sign, where there are two
// rounds or more; else the unpaired figure v (of the pooled runs).
func relative(p recfile.OverheadStats, v *float64, format string, scale float64) string {
	if p.CI95High == nil {
		return optional(v, format, scale)
	}
	half := (*p.CI95High - *p.CI95Low) / 2 * scale
	return fmt.Sprintf(format+" ±"+strings.Replace(format, "%+", "%", 1), p.Mean*scale, half)
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

// hookHeader are the columns of the in-kernel cost table.
func hookHeader(res *recfile.Overhead) []string {
	return []string{"config", "source", "program", "runs per msg", "ns per run", "ns per msg",
		fmt.Sprintf("%% of a core at %.0f msg/s", res.Options.CPURate)}
}

// hookRows are the in-kernel cost table's cells: per configuration, each
// program, each source's total and the total of every hook.
func hookRows(res *recfile.Overhead) [][]string {
	var out [][]string
	row := func(config, source, name string, p recfile.OverheadProg) {
		out = append(out, []string{config, source, name,
			fmt.Sprintf("%.2f", perMsg(float64(p.Runs), p.Messages)), fmt.Sprintf("%.0f", p.NsPerRun), fmt.Sprintf("%.0f", p.NsPerMsg),
			fmt.Sprintf("%.2f", p.NsPerMsg*res.Options.CPURate/1e7)})
	}
	for _, c := range res.Configs {
		var all recfile.OverheadProg
		for i, p := range c.Progs {
			row(c.Name, p.Source, p.Name, p)
			if i+1 == len(c.Progs) || c.Progs[i+1].Source != p.Source {
				row(c.Name, p.Source, "all", sumOf(c.Progs, p.Source))
			}
			all.Runs, all.Ns, all.Messages = all.Runs+p.Runs, all.Ns+p.Ns, p.Messages
		}
		if len(c.Progs) > 0 {
			row(c.Name, "all", "all", costOf(all, all.Messages))
		}
	}
	return out
}

// sumOf is the total cost of source's programs (each program counted over
// the same messages).
func sumOf(ps []recfile.OverheadProg, source string) recfile.OverheadProg {
	var s recfile.OverheadProg
	for _, p := range ps {
		if p.Source == source {
			s.Runs, s.Ns, s.Messages = s.Runs+p.Runs, s.Ns+p.Ns, p.Messages
		}
	}
	return costOf(s, s.Messages)
}

// sameCallLines say, for each configuration with both socket probes
// (--match both), what the frame probe cost against the marker probe on
// the same calls: pooled over its runs, and run by run, the figure the
// cost goal of matching by frame is judged by.
func sameCallLines(res *recfile.Overhead) []string {
	var out []string
	for _, c := range res.Configs {
		f, m := sumOf(c.Progs, SourceSockioFrame), sumOf(c.Progs, "sockio")
		if f.Ns == 0 || m.Ns == 0 {
			continue
		}
		var each []string
		for _, r := range res.Runs {
			if rf, rm := sumOf(r.Progs, SourceSockioFrame), sumOf(r.Progs, "sockio"); r.Config == c.Name && rf.Ns > 0 && rm.Ns > 0 {
				each = append(each, fmt.Sprintf("%.2f×", float64(rf.Ns)/float64(rm.Ns)))
			}
		}
		out = append(out, fmt.Sprintf("%s, on the same calls: the frame probe %.0f ns per message against the marker probe's %.0f (%.2f×); run by run %s.",
			c.Name, f.NsPerMsg, m.NsPerMsg, float64(f.Ns)/float64(m.Ns), strings.Join(each, ", ")))
	}
	return out
}

func perMsg(v float64, messages int) float64 {
	if messages == 0 {
		return 0
	}
	return v / float64(messages)
}

// WriteTable prints the result as aligned text tables, or as Markdown for
// the README: the configurations, then the in-kernel cost per hook when
// measured, followed by the machine it was measured on.
func WriteTable(w io.Writer, res *recfile.Overhead, markdown bool) error {
	var b strings.Builder
	writeTable(&b, tableHeader(res), rows(res), markdown)
	if hr := hookRows(res); len(hr) > 0 {
		fmt.Fprintf(&b, "\nIn-kernel cost per hook, over the %.0f msg/s phase (the kernel's BPF run-time statistics):\n\n", res.Options.CPURate)
		writeTable(&b, hookHeader(res), hr, markdown)
	}
	for _, l := range sameCallLines(res) {
		fmt.Fprintf(&b, "\n%s\n", l)
	}
	fmt.Fprintf(&b, "\n%s\n", machine(res))
	_, err := io.WriteString(w, b.String())
	return err
}

func writeTable(b *strings.Builder, header []string, rows [][]string, markdown bool) {
	if markdown {
		line := func(cells []string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
		line(header)
		line(strings.Split(strings.Repeat("---,", len(header)-1)+"---", ","))
		for _, r := range rows {
			line(r)
		}
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, r := range append([][]string{header}, rows...) {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// machine says what and where was measured, in one line.
func machine(res *recfile.Overhead) string {
	o := res.Options
	runs := fmt.Sprintf("%d runs", o.Runs)
	if res.Stop != "" {
		runs = res.Stop
	}
	return fmt.Sprintf("%s, %s (configurations interleaved in rounds, a fresh broker each run), %d B messages (%s payloads): saturation %d messages after %d warm-up; latency at %.0f msg/s for %v (first %v left out); tracer CPU at %.0f msg/s for %v. Broker on CPU %s, load on CPU %s. %s, %d CPUs, Linux %s, %s.",
		res.Broker, runs, o.Size, cmp.Or(o.Payload, "fixed"), o.Count, o.WarmupCount, o.Rate, time.Duration(o.LatencyNs), time.Duration(o.LatencyWarmNs),
		o.CPURate, time.Duration(o.CPUNs), o.BrokerCPUs, o.LoadCPUs, res.CPUModel, res.Host.CPUs, res.Host.Kernel, res.StartWall)
}
