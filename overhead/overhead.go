// Package overhead measures what tracing costs a broker, by the MooBench
// method (Waller & Hasselbring 2013): the same load against fresh broker
// processes in configurations that add one cause of overhead at a time —
// untraced (T), probes attached but matching nothing (T+I), collecting
// (T+I+C), collecting and writing (T+I+C+W) — and beside them the tools a
// user would reach for instead (bpftrace, tcpdump). Every configuration is
// repeated on fresh brokers, configurations interleaved so that a noisy
// minute of the machine does not fall on one of them; each run discards a
// warm-up; the results are means with 95% confidence intervals, medians and
// quartiles.
//
// brokertrace, the load generator and the alternatives all run as child
// processes, so that the tracer's own CPU and peak memory come from the
// kernel's accounting of that process (wait4).
package overhead

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// Experiment is one overhead measurement.
type Experiment struct {
	Broker  Broker
	Configs []Config
	Runs    int
	Exe     string // the brokertrace executable: tracer and load generator
	Out     string // directory for overhead.json, the plot and runs/
	// Dir is Out opened (outdir.Open): every file the experiment writes
	// itself goes through it.
	Dir *outdir.Dir

	WarmupCount int           // messages sent as fast as possible first, discarded
	Count       int           // messages of the saturation load
	Size        int           // body size, marker included
	Payload     string        // the loads' --payload ("": the load's default)
	Rate        float64       // msg/s of the latency load
	Latency     time.Duration // how long the latency load sends
	LatencyWarm time.Duration // its first part, left out
	CPURate     float64       // msg/s of the fixed-rate phase the tracer's CPU is measured over
	CPUDuration time.Duration // how long that phase sends
	// ProgStats turns the kernel's BPF run-time statistics on during the
	// CPU phase, for each program's in-kernel cost.
	ProgStats bool
	// RatioCI (± half-width of the paired throughput ratio's 95% CI) and
	// LatencyCINs (full width of the paired added latency's, ns): with
	// either set, rounds go on past Runs up to MaxRuns until every traced
	// configuration meets them.
	RatioCI, LatencyCINs float64
	MaxRuns              int

	BrokerCPUs, LoadCPUs, TracerCPUs string // taskset lists; TracerCPUs "" = unpinned

	Progress io.Writer // progress lines with an ETA; nil: none
	Version  string
}

// Run runs every configuration Runs times, interleaved in rounds, and
// returns the result; with a CI goal (RatioCI, LatencyCINs) it goes on
// round by round up to MaxRuns until the goals are met. It writes each
// run's files under Out/runs. When ctx ends it stops after the run under
// way has cleaned up (its broker and tracer ended) and returns what was
// measured, with ctx's error.
func (e *Experiment) Run(ctx context.Context) (*recfile.Overhead, error) {
	res := e.header()
	lat := map[string][]float64{} // pooled latencies per configuration
	start, failed := time.Now(), 0
	rounds := max(e.Runs, e.MaxRuns)
	for i := 1; i <= rounds; i++ {
		for _, c := range e.Configs {
			if ctx.Err() != nil {
				res.Configs = aggregate(e.Configs, res.Runs, lat)
				return res, fmt.Errorf("%w: interrupted after %d runs", ErrRuns, len(res.Runs))
			}
			run, ls, err := e.runOnce(c, i)
			switch {
			case err != nil && errors.Is(err, ErrBroker) && len(res.Runs) == 0:
				return res, err // the broker cannot run here at all
			case err != nil:
				// One bad run (a broker stall, a tracer that failed) must
				// not throw away the others: keep it, say why, go on.
				run.Error = err.Error()
				failed++
			default:
				lat[c.Name] = append(lat[c.Name], ls...)
			}
			res.Runs = append(res.Runs, run)
			e.progress(len(res.Runs), max(e.Runs, i)*len(e.Configs), start, run)
		}
		if res.Stop = e.stop(i, aggregate(e.Configs, res.Runs, lat)); res.Stop != "" {
			break
		}
	}
	res.Configs = aggregate(e.Configs, res.Runs, lat)
	res.EndWall = time.Now().Format(time.RFC3339)
	if e.Progress != nil {
		fmt.Fprintf(e.Progress, "overhead: %s\n", res.Stop)
	}
	if failed > 0 {
		return res, fmt.Errorf("%w: %d of %d runs failed (see \"error\" in %s)", ErrRuns, failed, len(res.Runs), recfile.OverheadFile)
	}
	return res, nil
}

// stop says why the rounds end after round i, or "" to go on.
func (e *Experiment) stop(i int, cs []recfile.OverheadConfig) string {
	if i < e.Runs {
		return ""
	}
	if e.RatioCI <= 0 && e.LatencyCINs <= 0 {
		return fmt.Sprintf("%d runs per configuration, as asked", i)
	}
	ok, widest, worst := converged(cs, e.RatioCI, e.LatencyCINs)
	switch {
	case ok:
		return fmt.Sprintf("the paired CI goals were met after %d rounds; the widest: %s", i, widest)
	case i >= e.MaxRuns:
		// A CI narrows as 1/√n: at this spread the goal needs about
		// i·worst² rounds.
		need := ""
		if !math.IsInf(worst, 1) {
			need = fmt.Sprintf("; at this spread about %.0f rounds would meet it", math.Ceil(float64(i)*worst*worst))
		}
		return fmt.Sprintf("%d rounds (the most asked) did not meet the paired CI goals; the widest: %s%s", i, widest, need)
	}
	return ""
}

func orZero(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// ErrRuns is returned with the result when some runs failed.
var ErrRuns = errors.New("overhead")

func (e *Experiment) header() *recfile.Overhead {
	host, _ := os.Hostname()
	return &recfile.Overhead{
		Tool: "brokertrace", Version: e.Version, Host: hostInfo(host), CPUModel: cpuModel(),
		Broker: e.Broker.Name, Command: e.Broker.commandLine(),
		Options: recfile.OverheadOptions{
			Runs: e.Runs, Configs: configNames(e.Configs), WarmupCount: e.WarmupCount, Count: e.Count,
			Size: e.Size, Payload: e.Payload, Rate: e.Rate, LatencyNs: e.Latency.Nanoseconds(), LatencyWarmNs: e.LatencyWarm.Nanoseconds(),
			BrokerCPUs: e.BrokerCPUs, LoadCPUs: e.LoadCPUs, TracerCPUs: e.TracerCPUs,
			CPURate: e.CPURate, CPUNs: e.CPUDuration.Nanoseconds(), ProgStats: e.ProgStats,
			RatioCI: e.RatioCI, LatencyCINs: e.LatencyCINs, MaxRuns: e.MaxRuns,
		},
		StartWall: time.Now().Format(time.RFC3339),
	}
}

func (e *Experiment) progress(done, total int, start time.Time, r recfile.OverheadRun) {
	if e.Progress == nil {
		return
	}
	el := time.Since(start)
	eta := time.Duration(float64(el) / float64(done) * float64(total-done))
	if r.Error != "" {
		fmt.Fprintf(e.Progress, "overhead: %d/%d %s run %d FAILED: %s; ETA %v\n", done, total, r.Config, r.Run, r.Error, eta.Round(time.Second))
		return
	}
	fmt.Fprintf(e.Progress, "overhead: %d/%d %s run %d: %.0f msg/s, median latency %.1f µs, tracer %.1f%% CPU (%.2f%% at %.0f msg/s); ETA %v\n",
		done, total, r.Config, r.Run, r.ThroughputPerSec, r.LatencyMedian/1e3, r.TracerCPUPct, orZero(r.CPUTracerPct), e.CPURate, eta.Round(time.Second))
}

// runDir is a run's directory relative to Out.
func runDir(c Config, i int) string {
	return filepath.Join("runs", fmt.Sprintf("%s-%d", safeName(c.Name), i))
}

// safeName makes a configuration name a file name: T+I+C → T-I-C.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '+' {
			b[i] = '-'
		}
	}
	return string(b)
}
