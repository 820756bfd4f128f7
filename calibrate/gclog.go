package calibrate

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/brokertrace/brokertrace/recfile"
)

// gcPause is one stop-the-world pause of a JVM's unified GC log, its end
// on CLOCK_MONOTONIC (to the log's millisecond).
type gcPause struct{ end, dur int64 }

// gcLine matches `-Xlog:gc:file=F:time` lines such as
// [2026-11-23T18:28:53.075+0000] GC(0) Pause Young (Allocation Failure) 51M->5M(121M) 72.081ms
// (other decorations may follow the time).
var gcLine = regexp.MustCompile(`^\[(\d{4}-\d\d-\d\dT[\d:.]+[+-]\d{4})\].*GC\(\d+\) Pause .* ([\d.]+)ms\s*$`)

// gcSlack covers the log's millisecond resolution when pauses are matched.
const gcSlack = int64(1500 * time.Microsecond)

// readGCLog reads the pauses of a GC log. Its wall-clock times are put on
// CLOCK_MONOTONIC with the offset of the first step's recording
// (meta.json start_wall and start_monotonic_ns), good to a millisecond.
func readGCLog(path string, ref *step) ([]gcPause, error) {
	wall, err := time.Parse(time.RFC3339Nano, ref.meta.StartWall)
	if err != nil {
		return nil, fmt.Errorf("step %d: meta.json start_wall %q: %w", ref.Index, ref.meta.StartWall, err)
	}
	off := ref.meta.StartNs - wall.UnixNano()
	f, err := os.Open(path)
	if err != nil {
		return nil, inputError("--gc-log: %v", err)
	}
	defer f.Close()
	var out []gcPause
	lines := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines++
		m := gcLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		t, err1 := time.Parse("2006-01-02T15:04:05.000-0700", m[1])
		ms, err2 := strconv.ParseFloat(m[2], 64)
		if err1 != nil || err2 != nil {
			return nil, inputError("--gc-log %s:%d: cannot read %q", path, lines, sc.Text())
		}
		out = append(out, gcPause{end: t.UnixNano() + off, dur: int64(ms * 1e6)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, inputError("--gc-log %s: no pause line with a time decoration in %d lines (log with -Xlog:gc:file=FILE:time)", path, lines)
	}
	return out, nil
}

// gcStep compares one step's GC pauses with the pauses found in the
// kernel's data and counts the messages read between GC pauses.
func gcStep(s *step, gc []gcPause, reads []read, kernel []recfile.CalPauseRow, p *recfile.CalPauses, between []float64) []float64 {
	prev := -1
	for _, g := range gc {
		if g.end < s.start || g.end >= s.end {
			continue
		}
		p.GCLogPauses++
		p.GCLogTotalNs += g.dur
		n, _ := slices.BinarySearchFunc(reads, g.end, func(r read, t int64) int { return cmp.Compare(r.tin, t) })
		if prev >= 0 {
			between = append(between, float64(n-prev))
		}
		prev = n
		if g.dur < p.MinNs {
			continue
		}
		p.GCLogLong++
		if slices.ContainsFunc(kernel, func(k recfile.CalPauseRow) bool { return overlaps(k, g) }) {
			p.GCLogFound++
		}
	}
	for _, k := range kernel {
		if slices.ContainsFunc(gc, func(g gcPause) bool { return overlaps(k, g) }) {
			p.KernelOnGC++
		}
	}
	return between
}

func overlaps(k recfile.CalPauseRow, g gcPause) bool {
	return k.Start < g.end+gcSlack && k.End > g.end-g.dur-gcSlack
}
