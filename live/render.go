package live

import (
	"fmt"
	"math"
	"strings"

	"github.com/brokertrace/brokertrace/source"
)

// line is the second as one plain line. Its words are stable for scripts:
// "in R/s (N) out R/s (N)" counts the markers read and written in the
// second, so the N of all lines add up to the recording's counters.
func (v *View) line(s second) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%.0fs ", s.elapsed)
	if s.in == 0 && s.out == 0 {
		fmt.Fprintf(&b, "no marked messages in the last second; send some with: %s", v.hint())
	} else {
		fmt.Fprintf(&b, "in %.0f/s (%d) out %.0f/s (%d) | latency p50 %s p99 %s max %s | ctxsw/msg %s cpu/msg %s sockq %s | pkt in %s x%s/msg out %s x%s/msg",
			float64(s.in)/s.secs, s.in, float64(s.out)/s.secs, s.out, latency(s.rows, s.p50), latency(s.rows, s.p99), latency(s.rows, s.max),
			num(s.ctxsw, 2), nsOf(s.oncpu), nsOf(s.sockq), bytesOf(s.payloadIn), num(s.pktsPerMsgIn, 2), bytesOf(s.payloadOut), num(s.pktsPerMsgOut, 2))
	}
	fmt.Fprintf(&b, " | calls r %.0f/s w %.0f/s, %s/s in %s/s out | broker cpu %s switches %s/s | drops %d unscanned %s",
		s.reads, s.writes, bytesOf(s.bytesIn), bytesOf(s.bytesOut), percent(s.cpu), num(s.switches, 0), s.dropped, bytesOf(float64(s.unscanned)))
	return b.String()
}

// screen is the second as the lines of a terminal screen.
func (v *View) screen(s second) []string {
	lines := append([]string{}, v.opts.Header...)
	if v.attached != "" {
		lines = append(lines, v.attached)
	}
	lines = append(lines, v.notes...)
	lines = append(lines, fmt.Sprintf("%.0fs recorded; last second:  (Ctrl-C: stop, print the summary, keep the files)", s.elapsed), "")
	if s.in == 0 && s.out == 0 {
		lines = append(lines, "  no marked messages in the last second. Send some with:", "    "+v.hint(), "")
	}
	row := func(name, format string, args ...any) {
		lines = append(lines, fmt.Sprintf("  %-22s "+format, append([]any{name}, args...)...))
	}
	row("messages in / out", "%.0f/s / %.0f/s", float64(s.in)/s.secs, float64(s.out)/s.secs)
	row("broker latency", "p50 %s  p99 %s  max %s", latency(s.rows, s.p50), latency(s.rows, s.p99), latency(s.rows, s.max))
	row("context switches", "%s per message (sched window: %s)", num(s.ctxsw, 2), num(s.schedPerMsg, 2))
	row("CPU", "%s per message; broker %s of a core (cpu window: %s)", nsOf(s.oncpu), percent(s.cpu), num(s.util, 2))
	row("socket-queue wait", "%s mean", nsOf(s.sockq))
	row("packets in", "%s payload/packet, %s packets/message", bytesOf(s.payloadIn), num(s.pktsPerMsgIn, 2))
	row("packets out", "%s payload/packet, %s packets/message", bytesOf(s.payloadOut), num(s.pktsPerMsgOut, 2))
	row("socket calls", "%.0f reads/s (%s/s), %.0f writes/s (%s/s)", s.reads, bytesOf(s.bytesIn), s.writes, bytesOf(s.bytesOut))
	row("context switches/s", "%s (all broker threads)", num(s.switches, 0))
	row("lost so far", "%d events or markers dropped; %s unscanned (~%.0f markers)", s.dropped, bytesOf(float64(s.unscanned)), s.missedEst)
	if f := s.frame; f != nil {
		row("matched by frame", "%d ambiguous, %d unmatched so far; %d bad frames, %s skipped, %s not parsed, %s encrypted",
			f.ambiguous, f.unmatched, f.bad, bytesOf(float64(f.skipped)), bytesOf(float64(f.unparsed)), bytesOf(float64(f.encrypted)))
	}
	return lines
}

func (v *View) hint() string {
	if v.opts.Hint == "" {
		return "brokertrace load --url URL --rate 1000 --count 10000"
	}
	return v.opts.Hint
}

func latency(n uint64, ns int64) string {
	if n == 0 {
		return "-"
	}
	return source.FormatNs(ns)
}

func num(x float64, prec int) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, x)
}

func nsOf(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return source.FormatNs(int64(x))
}

func percent(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*x)
}

// bytesOf formats a byte count with a decimal unit.
func bytesOf(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "-"
	case x < 1e3:
		return fmt.Sprintf("%.0f B", x)
	case x < 1e6:
		return fmt.Sprintf("%.1f kB", x/1e3)
	case x < 1e9:
		return fmt.Sprintf("%.1f MB", x/1e6)
	}
	return fmt.Sprintf("%.1f GB", x/1e9)
}
