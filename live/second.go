package live

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/brokertrace/brokertrace/capture"
	"github.com/brokertrace/brokertrace/probes/sched"
	"github.com/brokertrace/brokertrace/record"
)

// second is what the view shows of the last second. Unknown values are
// NaN and shown as "-".
type second struct {
	elapsed, secs float64
	// in and out are the markers the broker read and wrote in the second;
	// rows the messages.csv rows written in it.
	in, out, rows uint64
	// Broker latency of the rows, ns.
	p50, p99, max int64
	// Means over the rows of the annotating sources' columns.
	ctxsw, oncpu, sockq float64
	// The sources' last windows.
	schedPerMsg, util                float64
	payloadIn, payloadOut            float64 // bytes per packet
	pktsPerMsgIn, pktsPerMsgOut      float64
	reads, writes, bytesIn, bytesOut float64 // socket calls and bytes per second
	cpu, switches                    float64 // from /proc: cores busy, switches per second
	dropped, unscanned               uint64  // so far
	missedEst                        float64 // markers estimated in the unscanned bytes
	// frame is set when matching by frame: what the parser and the
	// matcher could not tell, so far.
	frame *frameSoFar
}

// frameSoFar is matching by frame's uncertainty so far.
type frameSoFar struct {
	ambiguous, unmatched, bad, skipped, unparsed, encrypted uint64
}

// second computes the second that ended at t.
func (v *View) second(t *record.Tick, pro procSample) second {
	prevNow, c0, s0 := t.StartNs, t.Counts, t.Socket
	c0.MarkersIn, c0.MarkersOut, c0.Copies = 0, 0, 0
	s0.Calls, s0.Bytes = [2]uint64{}, [2]uint64{}
	if p := v.prev; p != nil {
		prevNow, c0, s0 = p.Now, p.Counts, p.Socket
	}
	s := second{elapsed: float64(t.Now-t.StartNs) / 1e9, secs: max(float64(t.Now-prevNow)/1e9, 1e-9)}
	s.in, s.out, s.rows = t.Counts.MarkersIn-c0.MarkersIn, t.Counts.MarkersOut-c0.MarkersOut, uint64(v.lat.TotalCount())
	s.p50, s.p99, s.max = v.lat.ValueAtQuantile(50), v.lat.ValueAtQuantile(99), v.lat.Max()
	s.ctxsw, s.oncpu, s.sockq = v.mean(t, "ctxsw"), v.mean(t, "oncpu_ns"), v.mean(t, "sockq_wait_ns")
	s.schedPerMsg = value(t, "sched", "switches_per_msg_target")
	s.util = value(t, "cpu", "broker_proc_util")
	s.payloadIn, s.pktsPerMsgIn = packets(t, v.prev, "in", s.in)
	s.payloadOut, s.pktsPerMsgOut = packets(t, v.prev, "out", s.out)
	rate := func(now, before uint64) float64 { return float64(now-before) / s.secs }
	s.reads, s.writes = rate(t.Socket.Calls[0], s0.Calls[0]), rate(t.Socket.Calls[1], s0.Calls[1])
	s.bytesIn, s.bytesOut = rate(t.Socket.Bytes[0], s0.Bytes[0]), rate(t.Socket.Bytes[1], s0.Bytes[1])
	s.cpu, s.switches = math.NaN(), math.NaN()
	if pro.ok && v.prevPro.ok {
		dt := pro.at.Sub(v.prevPro.at).Seconds()
		s.cpu = float64(pro.ticks-v.prevPro.ticks) / clockTicks / dt
		// Threads that exited take their switches with them.
		s.switches = max(float64(pro.switches)-float64(v.prevPro.switches), 0) / dt
	}
	st := t.Socket
	s.dropped = st.DroppedEvents + st.DroppedMarkers + st.Missed + st.CarryLost
	for _, k := range [][2]string{{"capture", capture.LiveDrops}, {"sched", sched.SwitchEventsDroppedKey}} {
		if x := value(t, k[0], k[1]); x > 0 {
			s.dropped += uint64(x)
		}
	}
	s.unscanned = st.Unscanned[0] + st.Unscanned[1]
	if f := st.Frame; f != nil {
		s.frame = &frameSoFar{ambiguous: t.Counts.Ambiguous, unmatched: t.Counts.OutWithoutIn, bad: f.Bad[0] + f.Bad[1],
			skipped: f.Skipped[0] + f.Skipped[1], unparsed: f.Unparsed[0] + f.Unparsed[1], encrypted: f.Encrypted[0] + f.Encrypted[1]}
	}
	s.missedEst = st.MissedMarkersEst[0] + st.MissedMarkersEst[1]
	return s
}

// mean is the mean over the second's rows of the extra column name.
func (v *View) mean(t *record.Tick, name string) float64 {
	for i, c := range t.Columns {
		if c == name && i < len(v.ns) && v.ns[i] > 0 {
			return v.sums[i] / float64(v.ns[i])
		}
	}
	return math.NaN()
}

// value is a source's live value, NaN when the source does not run or
// does not report it.
func value(t *record.Tick, source, name string) float64 {
	if x, ok := t.Sources[source][name]; ok {
		return x
	}
	return math.NaN()
}

// packets is the mean TCP payload per packet of direction dir ("in" or
// "out") in the second and the packets per marker, from the capture's
// cumulative counts: NaN without a capture or packets.
func packets(t, prev *record.Tick, dir string, markers uint64) (payload, perMsg float64) {
	n := delta(t, prev, "capture", capture.LivePkts+dir)
	if !(n > 0) {
		return math.NaN(), math.NaN()
	}
	perMsg = math.NaN()
	if markers > 0 {
		perMsg = n / float64(markers)
	}
	return delta(t, prev, "capture", capture.LiveBytes+dir) / n, perMsg
}

// delta is the growth of a source's cumulative live value since prev (since
// its start for the first tick).
func delta(t, prev *record.Tick, source, name string) float64 {
	x := value(t, source, name)
	if prev != nil {
		if p, ok := prev.Sources[source][name]; ok {
			x -= p
		}
	}
	return x
}

// clockTicks is USER_HZ, the unit of the CPU times in /proc/PID/stat: 100
// on every Linux architecture's user ABI.
const clockTicks = 100

// procSample is the broker's CPU time and context switches at one moment,
// from /proc: they show the broker busy or idle even with no marked
// traffic and no source reporting them.
type procSample struct {
	ok       bool
	at       time.Time
	ticks    uint64 // utime + stime of all threads
	switches uint64 // voluntary + involuntary, summed over the live threads
}

// readProc samples pid; ok is false when it cannot be read.
func readProc(pid int) procSample {
	if pid <= 0 {
		return procSample{}
	}
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return procSample{}
	}
	// Fields after the parenthesised comm, which may hold spaces: state is
	// field 3, utime 14 and stime 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return procSample{}
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	s := procSample{ok: true, at: time.Now(), ticks: ut + st}
	tasks, _ := filepath.Glob(dir + "/task/*/status")
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread exited
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				s.switches += n
			}
		}
	}
	return s
}
