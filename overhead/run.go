package overhead

import (
	"bufio"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// runOnce is one run of configuration c: a fresh broker, the tracer, a
// discarded warm-up, the latency load, the CPU phase, the saturation load.
// It returns the run and the latencies it measured.
func (e *Experiment) runOnce(c Config, i int) (recfile.OverheadRun, []float64, error) {
	run := recfile.OverheadRun{Config: c.Name, Run: i, Dir: runDir(c, i)}
	rd, err := e.Dir.Sub(run.Dir)
	if err != nil {
		return run, nil, err
	}
	defer rd.Close()
	dir := rd.Path()
	b, err := e.Broker.start(e.BrokerCPUs)
	if err != nil {
		return run, nil, err
	}
	defer b.stop()
	var t *tracer
	if c.tracer != nil {
		spec, err := c.tracer(&runEnv{exe: e.Exe, pid: b.pid, port: b.port, url: b.url, dir: dir, out: rd, brokerCPUs: e.BrokerCPUs})
		if err != nil {
			return run, nil, err
		}
		if t, err = startTracer(*spec, e.TracerCPUs, 2*time.Minute); err != nil {
			return run, nil, err
		}
		defer t.kill()
	}
	lat, received, err := e.loads(b.url, rd, &run, t)
	if err != nil {
		return run, nil, err
	}
	if t == nil {
		return run, lat, nil
	}
	u, err := t.stop()
	if err != nil {
		return run, nil, err
	}
	e.tracerCost(&run, u, t.spec.outputs)
	if c.recorded {
		err = meta(&run, dir, c.matches, received)
	}
	return run, lat, err
}

// loads runs the warm-up, the latency load, the CPU phase and the
// saturation load, fills run's load figures and returns the latencies and
// the messages received in all. t is the tracer (nil in T).
func (e *Experiment) loads(url string, dir *outdir.Dir, run *recfile.OverheadRun, t *tracer) ([]float64, int, error) {
	w, _, err := e.runLoad(url, dir, loadSpec{name: "warmup", count: e.WarmupCount})
	if err != nil {
		return nil, 0, err
	}
	l, ldir, err := e.runLoad(url, dir, loadSpec{name: "latency", rate: e.Rate, duration: e.Latency, warmup: e.LatencyWarm})
	if err != nil {
		return nil, 0, err
	}
	lat, err := latencies(ldir)
	if err != nil {
		return nil, 0, err
	}
	c, err := e.cpuPhase(url, dir, run, t)
	if err != nil {
		return nil, 0, err
	}
	s, sdir, err := e.runLoad(url, dir, loadSpec{name: "saturation", count: e.Count})
	if err != nil {
		return nil, 0, err
	}
	if run.ThroughputPerSec, err = throughput(sdir); err != nil {
		return nil, 0, err
	}
	st := Summarize(lat)
	run.Sent, run.Received = s.Sent, s.Received
	run.LatSent, run.LatReceived = l.Sent, l.Received
	run.LatencyMedian, run.LatencyMean = st.Median, st.Mean
	return lat, w.Received + l.Received + c.Received + s.Received, nil
}

// cpuPhase runs the fixed-rate load of the CPU figure and measures, over
// exactly its time, the tracer's CPU and, with ProgStats, the in-kernel
// cost of every BPF program the tracer holds. The tracer's figures are
// read while it still runs: its programs go when it exits.
func (e *Experiment) cpuPhase(url string, dir *outdir.Dir, run *recfile.OverheadRun, t *tracer) (recfile.LoadSummary, error) {
	spec := loadSpec{name: "cpu", rate: e.CPURate, duration: e.CPUDuration}
	if t == nil {
		start := time.Now()
		s, _, err := e.runLoad(url, dir, spec)
		run.CPUSent, run.CPUReceived, run.CPUWallNs = s.Sent, s.Received, time.Since(start).Nanoseconds()
		return s, err
	}
	pid := t.cmd.Process.Pid
	var stats io.Closer
	if e.ProgStats {
		if stats = enableProgStats(); stats == nil {
			run.Warnings = append(run.Warnings, "the kernel's BPF run-time statistics are unavailable (Linux 5.8+): no per-program cost")
		} else {
			defer stats.Close()
		}
	}
	tool := filepath.Base(t.spec.argv[0])
	before, cpu0, start := sampleProgs(pid, tool), procCPU(pid), time.Now()
	s, _, err := e.runLoad(url, dir, spec)
	wall, cpu := time.Since(start), procCPU(pid)-cpu0
	after := sampleProgs(pid, tool)
	run.CPUSent, run.CPUReceived, run.CPUWallNs = s.Sent, s.Received, wall.Nanoseconds()
	run.CPUTracerNs, run.CPUTracerPct = ptr(cpu.Nanoseconds()), ptr(100*float64(cpu)/float64(wall))
	if stats != nil {
		run.Progs = progCost(before, after, s.Received)
	}
	return s, err
}

// tracerCost fills the tracer's CPU, memory and output size.
func (e *Experiment) tracerCost(run *recfile.OverheadRun, u tracerUsage, outputs []string) {
	run.TracerCPUNs = (u.cpu - u.startCPU).Nanoseconds()
	run.TracerStartCPUNs = u.startCPU.Nanoseconds()
	if u.wall > 0 {
		run.TracerCPUPct = 100 * float64(u.cpu-u.startCPU) / float64(u.wall)
	}
	run.TracerMaxRSSBytes = u.maxRSS
	for _, o := range outputs {
		run.OutputBytes += diskUsage(o)
	}
	run.Dropped = u.dropped
}

// meta reads brokertrace's meta.json (its --json summary): events lost in
// the kernel, warnings and, when the configuration traces the broker,
// copies matched out of the copies received.
func meta(run *recfile.OverheadRun, dir string, matches bool, received int) error {
	var m recfile.Meta
	if err := recfile.ReadJSON(dir, "meta.json", &m); err != nil {
		return err
	}
	run.Dropped += m.Probe.Stats.DroppedEvents + m.Probe.Stats.Missed
	run.Warnings = m.Warnings
	if matches {
		run.Copies, run.CopiesSent = m.Messages.Copies, received
		run.MatchedShare = ptr(float64(m.Messages.Copies) / float64(received))
	}
	return nil
}

// diskUsage is the bytes in path, a file or a directory tree (0: none).
func diskUsage(path string) int64 {
	if path == "" {
		return 0
	}
	var n int64
	_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func hostInfo(name string) recfile.Host {
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return recfile.Host{Hostname: name, Kernel: strings.TrimSpace(string(rel)), Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
