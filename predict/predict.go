package predict

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/brokertrace/brokertrace/model/sim"
	"github.com/brokertrace/brokertrace/recfile"
)

// AsMeasured: each rate with the pattern (and burst) of its sweep step.
const AsMeasured = "as-measured"

// DefaultQueueCapacity: messages inside the broker beyond which the model
// holds arrivals back (flow control). The broker's real bound is its
// memory limit over the message size; any bound well above the messages
// in flight below saturation predicts the same saturation throughput.
const DefaultQueueCapacity = 1000

// ErrInput marks errors in what predict was given (exit code 2).
var ErrInput = errors.New("bad input")

// Options for Run.
type Options struct {
	Rates    []float64 // msg/s; nil: the calibration's steps' asked rates
	Pattern  string    // AsMeasured, regular, bursty, measured
	Burst    int       // for bursty when no step says; 10 as in the paper
	Messages int
	Warmup   int
	Seed     uint64
	Demand   sim.DemandKind
	// QueueCapacity bounds the messages in the model (0: unbounded);
	// DefaultQueueCapacity is the command's default.
	QueueCapacity int
	// Against is another sweep of the same broker to compare with (its
	// steps' rates, patterns and measurements) instead of the
	// calibration's: the model is judged on what it was not fitted to.
	Against  string
	Version  string
	Progress io.Writer // a line per rate with ETA; nil: quiet
}

// job is one rate to simulate.
type job struct {
	rate    float64
	pattern string
	burst   int
	step    *recfile.SweepStep
}

// Run predicts at every rate for the calibration at calPath.
func Run(calPath string, opt Options) (*recfile.Prediction, error) {
	dir, name := filepath.Split(calPath)
	var cal recfile.Calibration
	if err := recfile.ReadJSON(dir, name, &cal); err != nil {
		return nil, fmt.Errorf("%w: reading the calibration: %w", ErrInput, err)
	}
	m, warns, err := sim.FromCalibration(&cal, dir, opt.Demand)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInput, calPath, err)
	}
	p := &recfile.Prediction{Tool: "brokertrace", Version: opt.Version, Created: time.Now().UTC().Format("2006-01-02T15:04:05Z"),
		Calibration: calPath, Sweep: cal.Sweep, Model: modelSummary(m), Warnings: warns,
		Options: recfile.PredictionOptions{Pattern: opt.Pattern, Burst: opt.Burst, Messages: opt.Messages, Warmup: opt.Warmup,
			Seed: opt.Seed, Demand: opt.Demand.String(), QueueCapacity: opt.QueueCapacity}}
	m.QueueCapacity = opt.QueueCapacity
	sweepDir, steps, err := measuredSteps(&cal, dir, opt.Against)
	if err != nil {
		return nil, err
	}
	p.Options.Against = opt.Against
	p.SweepFound = sweepDir != ""
	if !p.SweepFound && cal.Sweep != "" {
		p.Warnings = append(p.Warnings, fmt.Sprintf("sweep %s not found: measured latency distributions left out, the calibration's step summaries compared", cal.Sweep))
	}
	jobs, err := plan(steps, opt)
	if err != nil {
		return nil, err
	}
	results, err := runJobs(m, jobs, sweepDir, opt)
	if err != nil {
		return nil, err
	}
	for _, r := range results {
		if r.warn != "" {
			p.Warnings = append(p.Warnings, r.warn)
		}
		if !r.skip {
			p.Rows = append(p.Rows, r.row)
		}
	}
	if len(p.Rows) == 0 {
		return nil, fmt.Errorf("%w: no rate could be simulated: %s", ErrInput, strings.Join(p.Warnings, "; "))
	}
	law := newCostLaw(&cal)
	for i := range p.Rows {
		law.split(&p.Rows[i])
	}
	if err := saturation(p, m, &cal, law, steps, jobs, opt); err != nil {
		return nil, err
	}
	p.Goals = Goals(p.Rows, p.Saturation)
	if opt.Against != "" {
		p.Repeat = repeatability(&cal, p.Rows, p.Saturation)
	}
	return p, nil
}

// jobResult is a job's row, or why it was skipped.
type jobResult struct {
	row  recfile.PredictionRow
	warn string
	skip bool
}

// runJobs runs the jobs on every CPU, a job each at a time: each
// simulation has its own seeded generator and only reads the model, and
// each step's messages.csv is read by its own job, so the results are
// the same as one after another, in the jobs' order, in a fraction of
// the time (the loop sweep → predict has a time goal).
func runJobs(m *sim.Model, jobs []job, sweepDir string, opt Options) ([]jobResult, error) {
	out := make([]jobResult, len(jobs))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	var mu sync.Mutex
	done, start := 0, time.Now()
	for i, j := range jobs {
		g.Go(func() error {
			row, warn, err := runJob(m, j, sweepDir, opt)
			if err != nil && err != errSkip {
				return fmt.Errorf("%s %.0f msg/s: %w", j.pattern, j.rate, err)
			}
			out[i] = jobResult{row: row, warn: warn, skip: err == errSkip}
			mu.Lock()
			defer mu.Unlock()
			if done++; !out[i].skip {
				progress(opt.Progress, done, len(jobs), start, row)
			}
			return nil
		})
	}
	return out, g.Wait()
}

func progress(w io.Writer, done, n int, start time.Time, row recfile.PredictionRow) {
	if w == nil {
		return
	}
	el := time.Since(start)
	eta := time.Duration(float64(el) / float64(done) * float64(n-done))
	fmt.Fprintf(w, "predict: %d/%d %s %.0f msg/s: %.0f msg/s, util %.3f, p50 %d ns (ETA %s)\n", done, n, row.Pattern, row.Rate,
		row.Predicted.Throughput, row.Predicted.BrokerUtil, row.Predicted.Latency.P50Ns, eta.Round(100*time.Millisecond))
}

// plan lists the rates to simulate, each with its sweep step if one
// matches (same pattern, asked rate within 0.5%).
func plan(steps []recfile.SweepStep, opt Options) ([]job, error) {
	if opt.Pattern == sim.Measured && opt.Rates != nil {
		return nil, fmt.Errorf("%w: --pattern measured replays the steps' arrivals: it takes no --rates", ErrInput)
	}
	var jobs []job
	add := func(rate float64, pattern string, burst int) {
		if pattern == sim.Regular {
			burst = 0
		}
		for _, j := range jobs {
			if j.rate == rate && j.pattern == pattern {
				return
			}
		}
		jobs = append(jobs, job{rate: rate, pattern: pattern, burst: burst, step: matchStep(steps, rate, pattern)})
	}
	if opt.Rates != nil {
		pat := opt.Pattern
		if pat == AsMeasured {
			pat = sim.Regular
		}
		for _, r := range opt.Rates {
			add(r, pat, opt.Burst)
		}
		return jobs, nil
	}
	for _, s := range steps {
		if s.Status != "" && s.Status != recfile.SweepDone || s.RateAsked <= 0 {
			continue
		}
		pat, burst := s.Pattern, max(s.Burst, opt.Burst)
		if opt.Pattern != AsMeasured {
			pat = opt.Pattern
		}
		if pat == sim.Measured {
			jobs = append(jobs, job{rate: s.RateAsked, pattern: pat, step: &s})
			continue
		}
		add(s.RateAsked, pat, burst)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%w: the calibration has no finished step: give --rates", ErrInput)
	}
	return jobs, nil
}

func matchStep(steps []recfile.SweepStep, rate float64, pattern string) *recfile.SweepStep {
	for i := range steps {
		s := &steps[i]
		if (s.Status == "" || s.Status == recfile.SweepDone) && s.Pattern == pattern && math.Abs(s.RateAsked/rate-1) <= 0.005 {
			return s
		}
	}
	return nil
}

func modelSummary(m *sim.Model) recfile.PredictionModel {
	pm := recfile.PredictionModel{CPUs: m.CPUs, SwitchPenaltyNs: m.SwitchPenaltyNs, QuantumNs: m.QuantumNs, GCThreshold: m.GCThreshold, GCPauseNs: m.GCPauseNs,
		WakePenaltyNs: m.WakePenaltyNs, WakeLatencyNs: m.WakeLatencyNs, SpinNs: m.SpinNs, PathLatencyNs: m.PathLatencyNs, SystemWakeNs: m.SystemWakeNs}
	for _, s := range m.Stages {
		pm.Stages = append(pm.Stages, recfile.PredictionStage{Name: s.Name, Outside: s.Outside, Demand: s.Demand.Kind.String(), MeanNs: s.Demand.MeanNs, Samples: len(s.Demand.Samples)})
	}
	return pm
}

// measuredSteps are the steps predictions are compared with and the
// directory of their sweep: the calibration's, or those of --against.
func measuredSteps(cal *recfile.Calibration, calDir, against string) (string, []recfile.SweepStep, error) {
	if against == "" {
		return findSweep(calDir, cal.Sweep), cal.Steps, nil
	}
	var sw recfile.Sweep
	if err := recfile.ReadJSON(against, recfile.SweepFile, &sw); err != nil {
		return "", nil, fmt.Errorf("%w: --against %s is not a sweep directory: %w", ErrInput, against, err)
	}
	if cal.Broker != "" {
		// Judging one broker's model on another's sweep means nothing.
		var first recfile.Meta
		for _, s := range sw.Steps {
			if recfile.ReadJSON(filepath.Join(against, s.Dir), recfile.MetaFile, &first) == nil {
				break
			}
		}
		if first.Target.Comm != "" && first.Target.Comm != cal.Broker {
			return "", nil, fmt.Errorf("%w: --against %s measured %s, the calibration is of %s", ErrInput, against, first.Target.Comm, cal.Broker)
		}
	}
	return against, sw.Steps, nil
}

// findSweep finds the sweep directory: as given, relative to the
// calibration, or the calibration's own directory.
func findSweep(calDir, sweep string) string {
	cands := []string{sweep, filepath.Join(calDir, sweep), calDir}
	if sweep == "" || filepath.IsAbs(sweep) {
		cands = []string{sweep, calDir}
	}
	i := slices.IndexFunc(cands, func(d string) bool {
		var s recfile.Sweep
		return d != "" && recfile.ReadJSON(d, recfile.SweepFile, &s) == nil
	})
	if i < 0 {
		return ""
	}
	return cands[i]
}
