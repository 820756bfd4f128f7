package calibrate

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/brokertrace/brokertrace/recfile"
)

// WriteText prints the calibration for people: the parameters with value,
// unit and source, each followed by its derivation; the stages; the
// pauses; coalescing per step; the warnings.
func WriteText(w io.Writer, cal *recfile.Calibration, path string) error {
	fmt.Fprintf(w, "calibration of %s (%s, %d B messages, %d CPU(s)) from %s, %d steps → %s\n\n",
		cal.Broker, cal.Protocol, cal.SizeBytes, cal.CPUs, cal.Sweep, len(cal.Steps), path)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARAMETER\tVALUE\tUNIT\tSOURCE\tSTEPS")
	for _, p := range cal.Params {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, num(p.Value), p.Unit, p.Source, joinInts(p.Steps))
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, p := range cal.Params {
		fmt.Fprintf(w, "  %s: %s\n", p.Name, p.Derivation)
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tROLE\tMEAN ns\tRAW MEAN ns\tTRIMMED ns\tSAMPLES\tFILE")
	for _, s := range cal.Stages {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.0f\t%d\t%s\n", s.Name, s.Role, s.MeanNs, s.RawMeanNs, s.TrimmedMeanNs, s.Samples, s.DemandFile)
	}
	tw.Flush()
	p := cal.Pauses
	fmt.Fprintf(w, "\npauses (≥ %d ns, steps %s): %d, mean %d ns, p90 %d ns, max %d ns; median %.0f messages between (%d intervals) → %s\n",
		p.MinNs, joinInts(p.Steps), p.Count, p.MeanNs, p.P90Ns, p.MaxNs, p.MsgsBetweenMedian, p.Intervals, p.File)
	fmt.Fprintf(w, "  GC pauses: %d, mean %d ns, median %.0f messages between; other stalls: %d, mean %d ns; unclassified: %d\n\n",
		p.GC.Count, p.GC.MeanNs, p.GC.MsgsBetweenMedian, p.Stalls.Count, p.Stalls.MeanNs, p.Unclassified)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tPATTERN\tRATE msg/s\tPKTS/MSG in/out\tBYTES/PKT in/out\tSEGS/SKB in/out")
	for _, c := range cal.Coalescing {
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.2f/%.2f\t%.0f/%.0f\t%.2f/%.2f\n", c.Step, c.Pattern, c.RateAchieved,
			c.PacketsPerMsgIn, c.PacketsPerMsgOut, c.BytesPerPacketIn, c.BytesPerPacketOut, c.SegsPerSKB["in"], c.SegsPerSKB["out"])
	}
	tw.Flush()
	if len(cal.Warnings) > 0 {
		fmt.Fprintf(w, "\nwarnings:\n  %s\n", strings.Join(cal.Warnings, "\n  "))
	}
	return nil
}

// num prints a value with the digits it needs.
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100 || v <= -100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.4g", v)
}
