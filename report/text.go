package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/brokertrace/brokertrace/analysis"
)

// WriteText writes the terminal summary: for each run, the answers to the
// methodology's questions — how high the latency is and where it peaks,
// whether its distribution has several humps, how the sender's and
// receiver's throughputs differ — and what else explains the peaks.
func (rep *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	nf := 0
	for _, r := range rep.Runs {
		nf += len(r.Figures)
	}
	fmt.Fprintf(&b, "brokertrace report: %d run(s), %d figures → %s (gnuplot files in %s)\n",
		len(rep.Runs), nf, rep.HTML, strings.TrimSuffix(rep.Out, "/")+"/plots")
	for _, r := range rep.Runs {
		b.WriteString("\n")
		writeRunText(&b, r, rep.Window)
	}
	if len(rep.Parametrised) > 0 {
		b.WriteString("\nruns compared (parametrised aggregates; every column in the .dat files):\n")
		for _, ps := range rep.Parametrised {
			fmt.Fprintf(&b, "  %s by %s (%s):\n", ps.Series, ps.Param, ps.Dat)
			tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "    %s\trun\tmessages\tmedian\tp99\tmax\tST median\tRT median\tmodes\tdip p\n", ps.Param)
			for _, row := range ps.Rows {
				v := row.Values
				fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", fmtNum(row.Param, 3), row.Label, fmtNum(float64(v["messages"]), 0),
					fmtNs(float64(v["latency_median_ns"])), fmtNs(float64(v["latency_p99_ns"])), fmtNs(float64(v["latency_max_ns"])),
					fmtRate(float64(v["st_median_per_s"])), fmtRate(float64(v["rt_median_per_s"])), fmtNum(float64(v["modes"]), 0), fmtP(float64(v["dip_p_value"])))
			}
			tw.Flush()
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeRunText(b *strings.Builder, r *Run, window int) {
	fmt.Fprintf(b, "%s\n", runTitle(r))
	if r.Target != "" {
		fmt.Fprintf(b, "  broker: %s (host %s)\n", r.Target, r.Host)
	}
	if s := r.ldSum(); s != "" {
		fmt.Fprintf(b, "  load: %s\n", s)
	}
	if j := r.Join; j != nil {
		fmt.Fprintf(b, "  joined: %s messages by id; same host: %s\n", fmtCount(j.Counts.Joined), j.SameHost)
	}
	var sers []*Series
	for _, s := range []*Series{r.E2E, r.Broker} {
		if s != nil {
			sers = append(sers, s)
		}
	}
	if len(sers) > 0 {
		writeLatencyText(b, sers, window)
	}
	if p := r.Path; p != nil {
		fmt.Fprintf(b, "  where the time goes (medians, %s joined messages): to the broker %s, inside %s, from the broker %s; end to end %s\n",
			fmtCount(p.Messages), fmtNs(p.ToBrokerNs.Median), fmtNs(p.BrokerNs.Median), fmtNs(p.FromBrokerNs.Median), fmtNs(p.E2ENs.Median))
	}
	writeTopText(b, sers)
	b.WriteString("\n")
	writeSourcesText(b, r)
	for _, l := range []struct {
		name  string
		items []string
	}{{"warning", r.Warnings}, {"not in this report", r.Missing}, {"note", r.Notes}} {
		for _, it := range l.items {
			fmt.Fprintf(b, "  %s: %s\n", l.name, it)
		}
	}
}

// writeLatencyText: the series' aggregates side by side, then their humps,
// throughput and peaks.
func writeLatencyText(b *strings.Builder, sers []*Series, window int) {
	b.WriteString("\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "  latency\t"
	for _, s := range sers {
		head += s.Name + "\t"
	}
	fmt.Fprintln(tw, head)
	row := func(name string, f func(a *analysis.Summary) string) {
		line := "  " + name + "\t"
		for _, s := range sers {
			line += f(&s.Analysis.LatencyNs) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	row("messages", func(a *analysis.Summary) string { return fmtCount(a.N) })
	row("mean", func(a *analysis.Summary) string { return fmtNs(a.Mean) })
	row("95% CI of mean", func(a *analysis.Summary) string { return fmtNs(a.CI95Low) + " – " + fmtNs(a.CI95High) })
	row("median (lower)", func(a *analysis.Summary) string { return fmtNs(a.Median) })
	row("robust deviation", func(a *analysis.Summary) string { return fmtNs(a.RobustDev) })
	row("min", func(a *analysis.Summary) string { return fmtNs(a.Min) })
	for _, p := range analysis.DefaultPercentiles {
		row("p"+fmtNum(p, 2), func(a *analysis.Summary) string { return fmtNs(a.Percentile(p)) })
	}
	row("max", func(a *analysis.Summary) string { return fmtNs(a.Max) })
	tw.Flush()
	b.WriteString("\n")
	for _, s := range sers {
		a := s.Analysis
		fmt.Fprintf(b, "  %s humps: %s dip test p = %s (%s)\n", s.Name, describeModes(a.LatencyModes), fmtP(a.LatencyDip.PValue), dipVerdict(a.LatencyDip.PValue, a.LatencyTied))
	}
	for _, s := range sers {
		if t := throughputLine(s, window); t != "" {
			fmt.Fprintf(b, "  %s throughput: %s\n", s.Name, t)
		}
	}
	for _, s := range sers {
		if p := peakPlace(s); p != "" {
			fmt.Fprintf(b, "  %s peaks: %s\n", s.Name, p)
		}
	}
}

// writeTopText lists each series' slowest messages.
func writeTopText(b *strings.Builder, sers []*Series) {
	for _, s := range sers {
		if len(s.Top) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n  slowest messages, %s:\n", s.Name)
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		cols := topColumns(s)
		line := "  "
		for _, c := range cols {
			if c.head != "id" {
				line += "  " + c.head + "\t"
			}
		}
		fmt.Fprintln(tw, line)
		for _, m := range s.Top {
			line := "  "
			for _, c := range cols {
				if c.head != "id" {
					line += "  " + c.val(m) + "\t"
				}
			}
			fmt.Fprintln(tw, line)
		}
		tw.Flush()
	}
}

// writeSourcesText: one line for each of the recording's sources.
func writeSourcesText(b *strings.Builder, r *Run) {
	if c := r.CtxSw; c != nil {
		fmt.Fprintf(b, "  %s\n", ctxswLine(c))
	}
	if s := r.SockqWait; s != nil && s.N > 0 {
		fmt.Fprintf(b, "  socket-queue wait (t_in − t_arrive): median %s, p99 %s, max %s over %s messages\n", fmtNs(s.Median), fmtNs(s.Percentile(99)), fmtNs(s.Max), fmtCount(s.N))
	}
	if c := r.CPU; c != nil {
		if c.NsPerMsg != nil {
			fmt.Fprintf(b, "  broker CPU per message: median %s (p99 %s), C_n median %s%% of one CPU (every %d messages, cpu_per_msg.csv)\n",
				fmtNs(c.NsPerMsg.Median), fmtNs(c.NsPerMsg.Percentile(99)), fmtNum(c.UsagePct.Median, 1), c.Every)
		}
		if c.BrokerUtil != nil {
			fmt.Fprintf(b, "  CPU per window (cpu.csv, %d windows): broker median %s CPUs (%s), whole system %s CPUs\n",
				c.Windows, fmtNum(c.BrokerUtil.Median, 3), c.BrokerSource, fmtNum(c.SystemUtil.Median, 3))
		}
	}
	if len(r.Threads) > 0 {
		t := r.Threads[0]
		fmt.Fprintf(b, "  busiest broker thread: %s/%d, %s of CPU, %s per message (%d threads in threads.csv)\n", t.Comm, t.TID, fmtNs(float64(t.CPUNs)), fmtNs(float64(t.CPUNsPerMsg)), len(r.Threads))
	}
	if p := r.Packets; p != nil {
		fmt.Fprintf(b, "  packets: in %s per message (mean payload %s B, %s segments per skb), out %s per message (mean payload %s B, %s segments per skb)\n",
			fmtNum(float64(p.In.PktsPerMsg), 3), fmtNum(float64(p.In.MeanPayload), 1), fmtNum(float64(p.In.SegsPerSkb), 3),
			fmtNum(float64(p.Out.PktsPerMsg), 3), fmtNum(float64(p.Out.MeanPayload), 1), fmtNum(float64(p.Out.SegsPerSkb), 3))
	}
}
