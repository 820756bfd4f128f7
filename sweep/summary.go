package sweep

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sync/errgroup"

	"github.com/brokertrace/brokertrace/recfile"
)

// Window returns a step's measured window from its load: [t0 + warm-up,
// t0 + step − cool-down), t0 the intended time of the load's first
// message. The warm-up leaves out connection set-up, a JIT's first
// compilations and the climb of the queues; the cool-down the load's
// shutdown, whose last sends and the broker's drain are not the steady
// state the step is about.
func Window(dir string, o recfile.SweepOptions) (start, end int64, err error) {
	// load.json names t0 (a step near saturation has millions of rows in
	// e2e.csv); the rows' earliest intended time when it does not.
	var ld recfile.LoadSummary
	if err := recfile.ReadJSON(dir, recfile.LoadJSONFile, &ld); err == nil && ld.StartNs > 0 {
		return ld.StartNs + o.WarmupNs, ld.StartNs + o.StepNs - o.CooldownNs, nil
	}
	t0 := int64(-1)
	err = recfile.ScanTable(filepath.Join(dir, recfile.E2EFile), func(r *recfile.E2ERow) error {
		if t0 < 0 || r.TIntended < t0 {
			t0 = r.TIntended
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if t0 < 0 {
		return 0, 0, fmt.Errorf("%s: no message was sent", filepath.Join(dir, recfile.E2EFile))
	}
	return t0 + o.WarmupNs, t0 + o.StepNs - o.CooldownNs, nil
}

// summarize fills st's measured figures from the step's files, each over
// the measured window only.
func summarize(dir string, st *recfile.SweepStep, o recfile.SweepOptions) error {
	var err error
	if st.WindowStartNs, st.WindowEndNs, err = Window(dir, o); err != nil {
		return err
	}
	in := func(t int64) bool { return t >= st.WindowStartNs && t < st.WindowEndNs }
	secs := float64(st.WindowEndNs-st.WindowStartNs) / 1e9
	// messages.csv and e2e.csv, the two large files, read at once: the
	// next step waits for this one's summary.
	meta, ml, err := readMeta(dir)
	if err != nil {
		return err
	}
	losses(&ml, st)
	var g errgroup.Group
	g.Go(func() error { return latency(dir, st, in) })
	g.Go(func() error { return summarizeLoad(dir, st, o, &meta, in, secs) })
	if err := g.Wait(); err != nil {
		return err
	}
	if w := clumped(st); w != "" {
		st.Warnings = append(st.Warnings, w)
	}
	for _, f := range []func(string, *recfile.SweepStep, func(int64) bool) error{cpu, jit, sched, network} {
		if err := f(dir, st, in); err != nil {
			return err
		}
	}
	if err := loadBusy(dir, st, o, in); err != nil {
		return err
	}
	st.Bottleneck, err = bottleneck(st, o, meta.Host.CPUs)
	return err
}

// summarizeLoad fills what the load's files say: sent and received in
// the window, the rate achieved, messages missing, and the recording's
// warnings.
func summarizeLoad(dir string, st *recfile.SweepStep, o recfile.SweepOptions, meta *recfile.Meta, in func(int64) bool, secs float64) error {
	err := recfile.ScanTable(filepath.Join(dir, recfile.E2EFile), func(r *recfile.E2ERow) error {
		if in(r.TSend) {
			st.Sent++
		}
		if r.TRecv != nil && in(*r.TRecv) {
			st.Received++
		}
		return nil
	})
	if err != nil {
		return err
	}
	st.RateAchieved = float64(st.Received) / secs
	st.Saturated = st.RateAchieved < o.Behind*st.RateAsked
	var ld recfile.LoadSummary
	if err := recfile.ReadJSON(dir, recfile.LoadJSONFile, &ld); err != nil {
		return err
	}
	st.Missing = ld.Missing
	st.Warnings = append(st.Warnings, meta.Warnings...)
	if ld.Error != "" {
		st.Warnings = append(st.Warnings, "load: "+ld.Error)
	}
	return nil
}

// latency fills Messages and LatencyNs from the first copies of
// messages.csv that entered the broker in the window, and ArrivalCV from
// their arrivals when every one's is known.
func latency(dir string, st *recfile.SweepStep, in func(int64) bool) error {
	h := newHist()
	var arrivals []int64
	unknown := false
	err := recfile.ScanArrivals(filepath.Join(dir, recfile.MessagesFile), func(m *recfile.MessageArrival) error {
		if m.Copy != 1 || !in(m.TIn) {
			return nil
		}
		h.Record(m.Latency)
		if m.TArrive == nil {
			unknown = true
		} else {
			arrivals = append(arrivals, *m.TArrive)
		}
		return nil
	})
	st.Messages = h.Count()
	st.LatencyNs = h.Stats()
	if cv, ok := gapCV(arrivals); ok && !unknown {
		st.ArrivalCV = &cv
	}
	return err
}

// clumpedCV is the arrival_cv above which a regular step's arrivals are
// called clumped: a Poisson stream's.
const clumpedCV = 1

// clumped warns of a regular step whose messages arrived clumped: a model
// that takes the step for one message every 1/rate is given another
// input than the broker had (RabbitMQ's "regular" 32 000 msg/s arrived
// with 2.81, its bursts of ten with 3.26).
func clumped(st *recfile.SweepStep) string {
	if st.Pattern != PatternRegular || st.ArrivalCV == nil || *st.ArrivalCV <= clumpedCV {
		return ""
	}
	return fmt.Sprintf("the regular pattern's messages arrived clumped on the broker's socket: arrival_cv %.2f (0: one every 1/rate, 1: a Poisson stream, 3: bursts of ten); the load fell behind its schedule and caught up", *st.ArrivalCV)
}

// gapCV is the coefficient of variation of the gaps between the sorted
// times ts; ok false with fewer than two gaps or no time between them.
func gapCV(ts []int64) (cv float64, ok bool) {
	if len(ts) < 3 {
		return 0, false
	}
	slices.Sort(ts)
	var sum, sq float64
	for i := 1; i < len(ts); i++ {
		g := float64(ts[i] - ts[i-1])
		sum, sq = sum+g, sq+g*g
	}
	n := float64(len(ts) - 1)
	mean := sum / n
	if mean <= 0 {
		return 0, false
	}
	return math.Sqrt(max(sq/n-mean*mean, 0)) / mean, true
}

// midIn says whether a time-series row belongs to the window: its middle
// lies in it. Rows are whole windows of the recording (100 ms by
// default), so the measured window is matched to within half a row.
func midIn(in func(int64) bool, start, end int64) bool { return in(start + (end-start)/2) }

// absent notes a file the step lacks (its source was off or unsupported).
func absent(st *recfile.SweepStep, err error, what string) error {
	if errors.Is(err, fs.ErrNotExist) {
		st.Absent = append(st.Absent, what)
		return nil
	}
	return err
}

// cpu fills the utilisations: time-weighted means over cpu.csv's rows.
// The broker's is its cgroup's when every row has it (run mode, or a
// broker in a cgroup of its own), else /proc's schedstat run time. The
// system's is the exact busy time (cpuidle) when every row has it, else
// /proc/stat's, which the tick samples: a prediction judged on it would
// be judged on a figure that can be a fraction of the truth.
func cpu(dir string, st *recfile.SweepStep, in func(int64) bool) error {
	var dur, cg, proc, sys, exact float64
	cgroupAll, exactAll := true, true
	err := recfile.ScanTable(filepath.Join(dir, recfile.CPUFile), func(r *recfile.CPURow) error {
		if !midIn(in, r.TStart, r.TEnd) {
			return nil
		}
		d := float64(r.TEnd - r.TStart)
		dur += d
		cg += r.BrokerCgroup * d
		proc += r.BrokerProc * d
		sys += r.System * d
		exact += r.SystemExact * d
		cgroupAll = cgroupAll && r.BrokerCgroup == r.BrokerCgroup // NaN: no cgroup
		exactAll = exactAll && !math.IsNaN(r.SystemExact)
		return nil
	})
	if err != nil || dur == 0 {
		return absent(st, orNotExist(err, dur), "cpu")
	}
	st.BrokerUtil, st.BrokerUtilSource = proc/dur, "schedstat"
	if cgroupAll {
		st.BrokerUtil, st.BrokerUtilSource = cg/dur, "cgroup"
	}
	st.SystemUtil, st.SystemUtilSource = sys/dur, "proc_stat"
	if exactAll {
		st.SystemUtil, st.SystemUtilSource = exact/dur, exactSource(dir)
	}
	return nil
}

// jit fills JITUtil: the JIT compiler threads' CPU in the windows of
// thread_windows.csv whose middle lies in the measured window, over the
// measured window's length, as cpu's rows are.
func jit(dir string, st *recfile.SweepStep, in func(int64) bool) error {
	w, err := recfile.JITWindows(dir)
	if err != nil || st.WindowEndNs <= st.WindowStartNs {
		return err
	}
	var ns int64
	for _, r := range w {
		if midIn(in, r.TStart, r.TEnd) {
			ns += r.CPUNs
		}
	}
	st.JITUtil = float64(ns) / float64(st.WindowEndNs-st.WindowStartNs)
	return nil
}

// exactSource is where the recording in dir took its exact busy columns
// from: cpuidle, or timer_list on hosts without cpuidle (meta.json's cpu
// source says).
func exactSource(dir string) string {
	var meta recfile.Meta
	if recfile.ReadJSON(dir, recfile.MetaFile, &meta) == nil {
		if m, ok := meta.Sources["cpu"].Meta.(map[string]any); ok {
			if s, ok := m["exact_busy_source"].(string); ok && s != "" {
				return s
			}
		}
	}
	return "cpuidle"
}

// sched fills context switches per message entering the broker, by both
// definitions, summed over sched.csv's rows, and the threads' wake-ups per
// second.
func sched(dir string, st *recfile.SweepStep, in func(int64) bool) error {
	var msgs, thr, cpus, vol uint64
	var dur int64
	err := recfile.ScanTable(filepath.Join(dir, recfile.SchedFile), func(r *recfile.SchedRow) error {
		if midIn(in, r.TStart, r.TEnd) {
			msgs += uint64(r.MsgsIn)
			thr += r.SwitchesTarget
			cpus += r.SwitchesCPUs
			vol += r.Voluntary
			dur += r.TEnd - r.TStart
		}
		return nil
	})
	if dur > 0 {
		st.WakeupsPerSec = float64(vol) / (float64(dur) / 1e9)
	}
	if err != nil || msgs == 0 {
		return absent(st, orNotExist(err, float64(msgs)), "sched")
	}
	st.SwitchesPerMsgThreads = float64(thr) / float64(msgs)
	st.SwitchesPerMsgCPUs = float64(cpus) / float64(msgs)
	return nil
}

// network fills packets and payload bytes per message from net.csv: in
// per message entering the broker, out per copy leaving it, as net.csv's
// own ratios are defined.
func network(dir string, st *recfile.SweepStep, in func(int64) bool) error {
	var msgsIn, msgsOut, pi, po, bi, bo uint64
	err := recfile.ScanTable(filepath.Join(dir, recfile.NetFile), func(r *recfile.NetRow) error {
		if midIn(in, r.TStart, r.TEnd) {
			msgsIn += uint64(r.MsgsIn)
			msgsOut += uint64(r.MsgsOut)
			pi, po, bi, bo = pi+r.PktsIn, po+r.PktsOut, bi+r.BytesIn, bo+r.BytesOut
		}
		return nil
	})
	if err != nil || msgsIn == 0 || msgsOut == 0 {
		return absent(st, orNotExist(err, float64(min(msgsIn, msgsOut))), "net")
	}
	st.PacketsPerMsgIn, st.BytesPerMsgIn = float64(pi)/float64(msgsIn), float64(bi)/float64(msgsIn)
	st.PacketsPerMsgOut, st.BytesPerMsgOut = float64(po)/float64(msgsOut), float64(bo)/float64(msgsOut)
	return nil
}

// orNotExist turns "the file had no row in the window" into absence.
func orNotExist(err error, n float64) error {
	if err == nil && n == 0 {
		return fs.ErrNotExist
	}
	return err
}

// hist is an HdrHistogram of ns durations (1 ns to an hour, 3
// significant digits) with the exact minimum and maximum: bounded memory
// however many messages a step has.
type hist struct {
	h        *hdrhistogram.Histogram
	min, max int64
	clamped  int64
}

const histMax = int64(3600e9)

// newHist makes an empty hist.
func newHist() *hist { return &hist{h: hdrhistogram.New(1, histMax, 3)} }

// Record adds one duration.
func (h *hist) Record(v int64) {
	if h.h.TotalCount() == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	if v > histMax {
		v, h.clamped = histMax, h.clamped+1
	}
	_ = h.h.RecordValue(max(v, 1))
}

// Count is the number of durations recorded.
func (h *hist) Count() int64 { return h.h.TotalCount() }

// Quantile is the duration at quantile q in [0, 1].
func (h *hist) Quantile(q float64) int64 {
	switch {
	case q <= 0:
		return h.min
	case q >= 1:
		return h.max
	}
	return min(max(h.h.ValueAtQuantile(100*q), h.min), h.max)
}

// Stats are the histogram's percentiles.
func (h *hist) Stats() recfile.LatencyStats {
	if h.Count() == 0 {
		return recfile.LatencyStats{}
	}
	return recfile.LatencyStats{Count: h.Count(), MinNs: h.min, P50Ns: h.Quantile(0.5), P90Ns: h.Quantile(0.9),
		P99Ns: h.Quantile(0.99), P999Ns: h.Quantile(0.999), MaxNs: h.max, MeanNs: h.h.Mean(), Clamped: h.clamped}
}
