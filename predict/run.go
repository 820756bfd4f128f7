package predict

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/brokertrace/brokertrace/model/sim"
	"github.com/brokertrace/brokertrace/recfile"
)

// errSkip: the rate cannot be simulated; the warning says why.
var errSkip = errors.New("skipped")

// binsPerDecade of the latency distributions in prediction.json.
const binsPerDecade = 20

// runJob simulates one rate and compares it with its step.
func runJob(m *sim.Model, j job, sweepDir string, opt Options) (recfile.PredictionRow, string, error) {
	row := recfile.PredictionRow{Rate: j.rate, Pattern: j.pattern, Burst: j.burst, Step: -1}
	var warn string
	var meas *recfile.PredictionValues
	var arrivals []int64
	var reads int
	if j.step != nil {
		row.Step = j.step.Index
		meas = stepValues(j.step)
		if sweepDir != "" {
			var err error
			arrivals, reads, err = stepLatencies(filepath.Join(sweepDir, j.step.Dir), j.step, meas)
			if err != nil {
				warn = fmt.Sprintf("step %d: %v: its latency distribution left out", j.step.Index, err)
			}
		}
	}
	a := sim.Arrivals{Pattern: j.pattern, Rate: j.rate, Burst: j.burst}
	if j.pattern == sim.Measured {
		if len(arrivals) < 2 {
			return row, fmt.Sprintf("step %d: no arrival times to replay (its messages.csv): not predicted", row.Step), errSkip
		}
		a.TimesNs = arrivals
		if reads > 0 {
			warn = fmt.Sprintf("step %d: %d of %d messages without t_arrive_ns (recorded without --sockq, or not matched on the socket): their read times replayed, which hold the broker's own batching", row.Step, reads, len(arrivals))
		}
	}
	t0 := time.Now()
	res, err := sim.Run(m, a, sim.Options{Messages: opt.Messages, Warmup: opt.Warmup, Seed: opt.Seed})
	if err != nil {
		return row, "", err
	}
	row.Predicted = values(res)
	row.Predicted.Saturated = res.Throughput < 0.97*res.OfferedRate
	row.SimStats = recfile.PredictionSimStats{Messages: res.Latency.Count(), OfferedRate: res.OfferedRate, InputWaitNs: res.InputWaitMeanNs,
		MaxInBroker: res.MaxInBroker, Events: res.Events, ElapsedNs: time.Since(t0).Nanoseconds(), StageUtil: res.StageUtil, LatencyClamps: res.Latency.Clamped}
	if meas != nil {
		row.Measured = meas
		row.Errors = Compare(&row.Predicted, meas, m.CPUs)
	}
	return row, warn, nil
}

func values(r *sim.Result) recfile.PredictionValues {
	return recfile.PredictionValues{Throughput: r.Throughput, BrokerUtil: r.BrokerUtil, SystemUtil: r.SystemUtil, SwitchesPerMsg: r.SwitchesPerMsg,
		WakeupsPerMsg: r.WakeupsPerMsg, ArrivalCV: &r.ArrivalCV, Latency: stats(&r.Latency), LatencyBins: bins(&r.Latency)}
}

func stats(h *sim.Hist) recfile.LatencyStats {
	q := func(p float64) int64 { return int64(math.Round(h.Quantile(p))) }
	return recfile.LatencyStats{Count: h.Count(), MinNs: int64(math.Round(h.Min())), P50Ns: q(0.5), P90Ns: q(0.9), P99Ns: q(0.99), P999Ns: q(0.999),
		MaxNs: int64(math.Round(h.Max())), MeanNs: h.Mean(), Clamped: h.Clamped}
}

func bins(h *sim.Hist) []recfile.PredictionBin {
	var out []recfile.PredictionBin
	for _, b := range h.Bins(binsPerDecade) {
		out = append(out, recfile.PredictionBin{LoNs: b.LoNs, HiNs: b.HiNs, Count: b.Count})
	}
	return out
}

// stepValues are what sweep.json measured at a step.
func stepValues(s *recfile.SweepStep) *recfile.PredictionValues {
	return &recfile.PredictionValues{WakeupsPerMsg: wakeupsPerMsg(s), Throughput: s.RateAchieved, BrokerUtil: s.BrokerUtil, JITUtil: s.JITUtil, SystemUtil: s.SystemUtil,
		ArrivalCV: s.ArrivalCV, SwitchesPerMsg: s.SwitchesPerMsgThreads, Latency: s.LatencyNs, Saturated: s.Saturated}
}

// stepLatencies reads the step's messages.csv: the latency distribution of
// first copies inside the measured window (into v, replacing its summary
// when the step had none), and their arrival times for --pattern
// measured: when each reached the broker's socket (t_arrive_ns), or,
// where that is unknown (reads is how many), when the broker read it. The
// reads are the broker's own batching, not its input: at regular 47 744
// msg/s RabbitMQ read 86% of its messages in the same read as the one
// before, where their arrivals were 11% in the same packet.
func stepLatencies(dir string, s *recfile.SweepStep, v *recfile.PredictionValues) (times []int64, reads int, err error) {
	var h sim.Hist
	in := func(t int64) bool {
		return (s.WindowStartNs == 0 || t >= s.WindowStartNs) && (s.WindowEndNs == 0 || t < s.WindowEndNs)
	}
	err = recfile.ScanArrivals(filepath.Join(dir, recfile.MessagesFile), func(m *recfile.MessageArrival) error {
		if m.Copy != 1 || !in(m.TIn) {
			return nil
		}
		h.Add(float64(m.Latency))
		if m.TArrive != nil {
			times = append(times, *m.TArrive)
		} else {
			times = append(times, m.TIn)
			reads++
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if h.Count() == 0 {
		return nil, 0, errors.New("no message in the step's window")
	}
	v.LatencyBins = bins(&h)
	if v.Latency.Count == 0 {
		v.Latency = stats(&h)
	}
	slices.Sort(times)
	return times, reads, nil
}

// saturation simulates far beyond every rate (3× the highest of the asked
// rates and the measured peak) with regular arrivals: the model's
// throughput there is its saturation throughput. The measured one is the
// highest rate a step achieved: the broker's capacity if a step
// saturated with the broker's CPU (or neither's) full, a lower bound if
// none did or only the load's CPUs were. It depends on the queue
// capacity: unbounded, every thread with work gets an equal share of the
// CPU and the pipeline's slowest thread falls behind the first (tokens
// pile up between them); bounded, the first thread waits for room as
// the broker's reading thread does under flow control.
func saturation(p *recfile.Prediction, m *sim.Model, cal *recfile.Calibration, law *costLaw, steps []recfile.SweepStep, jobs []job, opt Options) error {
	peak, reached, held, at := measuredPeak(steps)
	top := peak
	if pp, ok := cal.Param(recfile.CalPeakThroughput); ok {
		top = max(top, pp.Value)
	}
	for _, j := range jobs {
		top = max(top, j.rate)
	}
	// Past the fill of the queue (at 3× the rate it fills at 2/3 of the
	// arrivals' pace, or never when unbounded) the window is steady.
	warm := max(opt.Warmup, 5*m.QueueCapacity)
	res, err := sim.Run(m, sim.Arrivals{Pattern: sim.Regular, Rate: 3 * top}, sim.Options{Messages: max(opt.Messages, 10000), Warmup: warm, Seed: opt.Seed})
	if err != nil {
		return fmt.Errorf("saturation run at %.0f msg/s: %w", 3*top, err)
	}
	p.Saturation = recfile.PredictionSaturation{Predicted: res.Throughput, Measured: peak, Reached: reached, HeldByLoad: held && !reached,
		ModelWakeupsPerMsg: res.WakeupsPerMsg}
	CompareSaturation(&p.Saturation)
	law.saturation(&p.Saturation, at, m.CPUs)
	return nil
}

// measuredPeak is the highest rate the finished steps achieved, and the
// step that did (at); reached says a step saturated with the broker's
// CPU (or no known bottleneck) full, held that steps saturated only
// because the load's CPUs were: a step held back by the load's CPUs
// saturated the load, not the broker.
func measuredPeak(steps []recfile.SweepStep) (peak float64, reached, held bool, at *recfile.SweepStep) {
	for i, s := range steps {
		if s.Status == "" || s.Status == recfile.SweepDone {
			if s.RateAchieved > peak {
				peak, at = s.RateAchieved, &steps[i]
			}
			reached = reached || s.Saturated && s.Bottleneck != recfile.BottleneckLoad
			held = held || s.Saturated && s.Bottleneck == recfile.BottleneckLoad
		}
	}
	return peak, reached, held, at
}
