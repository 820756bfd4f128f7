package collect

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/source"

	"github.com/prometheus/procfs"

	"github.com/brokertrace/brokertrace/monotime"
)

// Files the CPU source writes into the recording directory.
const (
	CPUFile       = "cpu.csv"
	CPUPerMsgFile = "cpu_per_msg.csv"
	CPUCoresFile  = "cpu_cores.csv"
)

// DefaultEvery is how many messages apart the rows of cpu_per_msg.csv are
// by default: the ZeroMQ methodology's "every 100th message", coarse enough
// that the CPU time between two rows is many scheduler readings' worth.
const DefaultEvery = 100

// Options configure the CPU source.
type Options struct {
	// Every: cpu_per_msg.csv has a row for every Every-th message copy
	// leaving the broker; 0 means DefaultEvery.
	Every int

	// cgroupRoot, when set, is searched instead of the mount table for
	// the cgroup hierarchies; cgroupPath, when set, replaces the target's
	// cgroup. Tests use them to simulate hosts and targets whose cgroup
	// cannot be read.
	cgroupRoot string
	cgroupPath string
}

// Source is the "cpu" source.Source: it reads the broker's cgroup CPU time,
// its /proc/PID/stat and per-thread schedstat, and the system-wide
// /proc/stat at the start, every window and at the end, and writes
// cpu.csv (one row per window), cpu_per_msg.csv (the ZeroMQ C_n, every
// Every-th message) and cpu_cores.csv (each CPU, each window).
//
// All utilisations are fractions of ONE CPU (CPUs' worth): CPU time over
// wall time, so 1.0 is one CPU kept busy for the whole window, and a broker
// or a system using two CPUs fully shows 2.0 — comparable with each other
// and subtractable. Only system_util_frac is a fraction of all CPUs.
//
// Start, Sample, Drain and Finish run on the recording's goroutine;
// Watermark is a constant, safe from any goroutine.
type Source struct {
	opts    Options
	env     *source.Env
	proc    *procReader
	fs      procfs.FS
	cg      cgroupReader
	info    CgroupInfo
	missing []string

	readings []reading
	// brokerSrc is the broker CPU used for system_minus_broker_util and
	// cpu_ns_per_msg: cgroup when readable, else schedstat, else stat.
	brokerSrc string
	// perMsgSrc is the cumulative broker CPU U_n of cpu_per_msg.csv:
	// schedstat (ns resolution) when readable, else cgroup, else stat.
	perMsgSrc string

	// minGap: a reading closer than this to the previous one replaces
	// it, so that no window is so short that the counters' update lag
	// (a scheduler tick, a /proc/stat tick) dominates it.
	minGap int64
	reads  int // readings taken, including replaced and dropped ones
	// fails counts the readings each counter could not be read in;
	// trailing, those since it was last read.
	fails    map[string]int
	trailing map[string]int
	lastErr  map[string]error

	cores     *bufio.Writer
	coresFile *os.File
	coresErr  error
	// Per-CPU times at the last two readings: the window between them
	// goes to cpu_cores.csv once the last reading is final.
	perPrev, perLast map[int64]cpuTimes
	tPrev, tLast     int64
	drained          bool
}

// reading is one sample of every counter, in ns. An ok flag is false when
// that counter could not be read at this sample.
type reading struct {
	t         int64
	cg        usage
	cgOK      bool
	run, wait int64 // schedstat summed over threads
	runOK     bool
	user, sys int64 // /proc/PID/stat utime, stime
	statOK    bool
	system    cpuTimes // /proc/stat, all CPUs
	ncpu      int
	systemOK  bool
}

// NewSource returns the CPU source.
func NewSource(opts Options) *Source {
	if opts.Every <= 0 {
		opts.Every = DefaultEvery
	}
	return &Source{opts: opts, fails: map[string]int{}, trailing: map[string]int{}, lastErr: map[string]error{}}
}

// Name implements source.Source.
func (s *Source) Name() string { return "cpu" }

// Watermark implements source.Source: the source has no per-message events.
func (s *Source) Watermark() int64 { return math.MaxInt64 }

// Start takes the first reading. What cannot be read — the cgroup on a host
// without CPU accounting or with the target in the root cgroup, schedstat on
// a kernel without it — is left out and listed in meta.json; only when
// nothing at all can be read is the source unavailable.
func (s *Source) Start(env *source.Env) error {
	s.env = env
	fs, err := procfs.NewFS(procfs.DefaultMountPoint)
	if err != nil {
		return fmt.Errorf("%w: %v", source.ErrUnavailable, err)
	}
	s.fs = fs
	s.proc = newProcReader(fs, env.Target.PID, env.Target.StartTime)
	var missing []string
	s.cg, s.info, missing = openCgroup(discover(s.opts.cgroupRoot), env.Target.PID, s.opts.cgroupPath)
	s.missing = append(s.missing, missing...)

	// cpu_cores.csv is written as the readings come, so that a long
	// recording on a many-CPU host keeps only totals in memory.
	f, err := os.Create(filepath.Join(env.Out, CPUCoresFile))
	if err != nil {
		return err
	}
	s.coresFile = f
	s.cores = bufio.NewWriterSize(f, 64<<10)
	s.cores.WriteString("t_start_ns,t_end_ns,cpu,busy_util,user_util,nice_util,system_util,irq_util,softirq_util,iowait_util,steal_util,idle_util\n")

	s.minGap = max(int64(env.Window)/4, 1)
	first, per := s.read()
	if !first.runOK {
		s.missing = append(s.missing, fmt.Sprintf("schedstat: %v", s.lastErr["schedstat"]))
	}
	if !first.statOK {
		s.missing = append(s.missing, fmt.Sprintf("/proc/%d/stat: %v", env.Target.PID, s.lastErr["stat"]))
	}
	if !first.systemOK {
		s.missing = append(s.missing, fmt.Sprintf("/proc/stat: %v", s.lastErr["system"]))
	}
	if s.cg == nil && !first.runOK && !first.statOK && !first.systemOK {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("%w: %s", source.ErrUnavailable, strings.Join(s.missing, "; "))
	}
	switch {
	case first.cgOK:
		s.brokerSrc = "cgroup"
	case first.runOK:
		s.brokerSrc = "schedstat"
	case first.statOK:
		s.brokerSrc = "stat"
	}
	switch {
	case first.runOK:
		s.perMsgSrc = "schedstat"
	case first.cgOK:
		s.perMsgSrc = "cgroup"
	case first.statOK:
		s.perMsgSrc = "stat"
	}
	s.add(first, per)
	return nil
}

// read reads every counter once. The time is taken just before the reads,
// which together take well under a millisecond.
func (s *Source) read() (reading, map[int64]cpuTimes) {
	s.reads++
	r := reading{t: monotime.Now()}
	if s.cg != nil {
		u, err := s.cg.read()
		r.cg, r.cgOK = u, err == nil
		s.fail("cgroup", err)
	}
	var err error
	r.user, r.sys, err = s.proc.stat()
	r.statOK = err == nil
	s.fail("stat", err)
	if r.statOK {
		r.run, r.wait, err = s.proc.schedstat()
		r.runOK = err == nil
		s.fail("schedstat", err)
	} else {
		s.fail("schedstat", err)
	}
	var per map[int64]cpuTimes
	r.system, per, err = readSystem(s.fs)
	r.systemOK = err == nil
	r.ncpu = len(per)
	s.fail("system", err)
	return r, per
}

func (s *Source) fail(what string, err error) {
	if err != nil {
		s.fails[what]++
		s.trailing[what]++
		s.lastErr[what] = err
	} else {
		s.trailing[what] = 0
	}
}

// add keeps a reading. One taken less than minGap after the previous
// reading replaces it, unless it lacks a counter the previous one has (the
// target exited in between): then it is dropped. The first reading stays.
func (s *Source) add(r reading, per map[int64]cpuTimes) {
	if n := len(s.readings); n >= 2 && r.t-s.readings[n-1].t < s.minGap {
		last := &s.readings[n-1]
		if (last.cgOK && !r.cgOK) || (last.runOK && !r.runOK) || (last.statOK && !r.statOK) || (last.systemOK && !r.systemOK) {
			return
		}
		*last = r
		s.perLast, s.tLast = per, r.t
		return
	}
	s.flushCores()
	s.readings = append(s.readings, r)
	s.perPrev, s.tPrev = s.perLast, s.tLast
	s.perLast, s.tLast = per, r.t
}

// flushCores writes one cpu_cores.csv row per CPU for the window between the
// last two readings of /proc/stat.
func (s *Source) flushCores() {
	prev, per, t0, t := s.perPrev, s.perLast, s.tPrev, s.tLast
	if prev != nil && per != nil && t > t0 {
		ids := make([]int64, 0, len(per))
		for id := range per {
			if _, ok := prev[id]; ok {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		dt := float64(t - t0)
		var b []byte
		for _, id := range ids {
			d := per[id].sub(prev[id])
			b = strconv.AppendInt(b[:0], t0, 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, t, 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, id, 10)
			for _, v := range []int64{d.busy(), d.user, d.nice, d.system, d.irq, d.softirq, d.iowait, d.steal, d.idle} {
				b = append(b, ',')
				b = strconv.AppendFloat(b, float64(v)/dt, 'f', 6, 64)
			}
			b = append(b, '\n')
			if _, err := s.cores.Write(b); err != nil && s.coresErr == nil {
				s.coresErr = err
			}
		}
	}
	s.perPrev, s.tPrev = nil, 0 // written
}

// Sample implements source.Source. The window ends when the counters are
// read, not at now: the rows' times are those of the readings.
func (s *Source) Sample(now int64) {
	if s.drained {
		return
	}
	s.add(s.read())
}

// Drain implements source.Source: the recording has taken its last sample.
func (s *Source) Drain() error {
	s.drained = true
	return nil
}

// brokerNs returns the broker CPU counter src of r.
func (r *reading) brokerNs(src string) (int64, bool) {
	switch src {
	case "cgroup":
		return r.cg.total, r.cgOK
	case "schedstat":
		return r.run, r.runOK
	case "stat":
		return r.user + r.sys, r.statOK
	}
	return 0, false
}

// CPUMeta is the source's part of meta.json.
type CPUMeta struct {
	Cgroup CgroupInfo `json:"cgroup"`
	// Missing lists, in words, what could not be read at the start.
	Missing []string `json:"missing"`
	// BrokerCPUSource is the broker CPU that system_minus_broker_util and
	// cpu_ns_per_msg use: cgroup, schedstat or stat.
	BrokerCPUSource string `json:"broker_cpu_source"`
	// PerMsgSource is the cumulative CPU U of cpu_per_msg.csv.
	PerMsgSource string `json:"cpu_per_msg_source"`
	Every        int    `json:"cpu_every"`
	CPUs         int    `json:"cpus"` // CPUs in /proc/stat at the end
	// Samples is the number of readings kept (one more than cpu.csv's
	// rows); Reads counts those taken: a reading less than a quarter
	// window after the previous one replaces it (the last window of a
	// recording can be up to 1¼ windows long).
	Samples int `json:"samples"`
	Reads   int `json:"reads"`
	// Failures counts, per counter, the readings it could not be read in.
	Failures     map[string]int `json:"failures"`
	Threads      int            `json:"threads_seen"`
	ThreadsEnded int            `json:"threads_exited"`
	PerMsgRows   int            `json:"cpu_per_msg_rows"`
	// PerMsgSkipped counts every-N-th messages that left before the first
	// or after the last reading, which cannot be interpolated.
	PerMsgSkipped int    `json:"cpu_per_msg_skipped"`
	Totals        Totals `json:"totals"`
}

// Totals are the CPU times over the recording (first to last reading), in
// ns; null when the counter could not be read twice.
type Totals struct {
	DurationNs       int64    `json:"duration_ns"`
	CgroupNs         *int64   `json:"cgroup_ns"`
	CgroupUserNs     *int64   `json:"cgroup_user_ns"`
	CgroupSysNs      *int64   `json:"cgroup_sys_ns"`
	SchedstatNs      *int64   `json:"schedstat_ns"`
	SchedstatWaitNs  *int64   `json:"schedstat_wait_ns"`
	StatUserNs       *int64   `json:"stat_user_ns"`
	StatSysNs        *int64   `json:"stat_sys_ns"`
	SystemBusyNs     *int64   `json:"system_busy_ns"`
	SystemIRQNs      *int64   `json:"system_irq_ns"`
	SystemSoftIRQNs  *int64   `json:"system_softirq_ns"`
	SystemMinusNs    *int64   `json:"system_minus_broker_ns"`
	BrokerNsPerMsgIn *float64 `json:"broker_ns_per_msg"`
}

// delta is the change of a counter between the first and the last reading
// where it was readable.
func (s *Source) delta(ok func(*reading) bool, v func(*reading) int64) *int64 {
	first, last := -1, -1
	for i := range s.readings {
		if ok(&s.readings[i]) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 || first == last {
		return nil
	}
	d := v(&s.readings[last]) - v(&s.readings[first])
	return &d
}

// Finish writes cpu.csv and cpu_per_msg.csv and closes cpu_cores.csv.
func (s *Source) Finish(tl *source.Timeline) (source.Result, error) {
	res := source.Result{Files: []string{CPUFile, CPUPerMsgFile, CPUCoresFile}}
	meta := CPUMeta{
		Cgroup: s.info, Missing: s.missing, BrokerCPUSource: s.brokerSrc, PerMsgSource: s.perMsgSrc,
		Every: s.opts.Every, Samples: len(s.readings), Reads: s.reads, Failures: s.fails,
		Threads: s.proc.seen, ThreadsEnded: s.proc.exited,
	}
	if meta.Missing == nil {
		meta.Missing = []string{}
	}
	if n := len(s.readings); n > 0 {
		meta.CPUs = s.readings[n-1].ncpu
		meta.Totals.DurationNs = s.readings[n-1].t - s.readings[0].t
	}
	var errs []error
	s.flushCores()
	if err := s.cores.Flush(); err != nil && s.coresErr == nil {
		s.coresErr = err
	}
	if err := s.coresFile.Close(); err != nil && s.coresErr == nil {
		s.coresErr = err
	}
	if s.coresErr != nil {
		errs = append(errs, fmt.Errorf("%s: %w", CPUCoresFile, s.coresErr))
	}
	if err := s.writeWindows(tl); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", CPUFile, err))
	}
	rows, skipped, err := s.writePerMsg(tl)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", CPUPerMsgFile, err))
	}
	meta.PerMsgRows, meta.PerMsgSkipped = rows, skipped

	t := &meta.Totals
	cgOK := func(r *reading) bool { return r.cgOK }
	runOK := func(r *reading) bool { return r.runOK }
	statOK := func(r *reading) bool { return r.statOK }
	sysOK := func(r *reading) bool { return r.systemOK }
	t.CgroupNs = s.delta(cgOK, func(r *reading) int64 { return r.cg.total })
	t.CgroupUserNs = s.delta(cgOK, func(r *reading) int64 { return r.cg.user })
	t.CgroupSysNs = s.delta(cgOK, func(r *reading) int64 { return r.cg.sys })
	t.SchedstatNs = s.delta(runOK, func(r *reading) int64 { return r.run })
	t.SchedstatWaitNs = s.delta(runOK, func(r *reading) int64 { return r.wait })
	t.StatUserNs = s.delta(statOK, func(r *reading) int64 { return r.user })
	t.StatSysNs = s.delta(statOK, func(r *reading) int64 { return r.sys })
	t.SystemBusyNs = s.delta(sysOK, func(r *reading) int64 { return r.system.busy() })
	t.SystemIRQNs = s.delta(sysOK, func(r *reading) int64 { return r.system.irq })
	t.SystemSoftIRQNs = s.delta(sysOK, func(r *reading) int64 { return r.system.softirq })
	broker := s.delta(func(r *reading) bool { _, ok := r.brokerNs(s.brokerSrc); return ok },
		func(r *reading) int64 { v, _ := r.brokerNs(s.brokerSrc); return v })
	if broker != nil && t.SystemBusyNs != nil {
		d := *t.SystemBusyNs - *broker
		t.SystemMinusNs = &d
	}
	if broker != nil && len(tl.In) > 0 {
		v := float64(*broker) / float64(len(tl.In))
		t.BrokerNsPerMsgIn = &v
	}
	res.Meta = meta

	res.Warnings = append(res.Warnings, s.missing...)
	if s.info.OtherProcesses > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("cgroup %s also holds %d other processes; broker_cgroup_util counts them too", s.info.Path, s.info.OtherProcesses))
	}
	for _, what := range []string{"cgroup", "stat", "schedstat", "system"} {
		n := s.fails[what]
		if n == 0 || (what == "cgroup" && s.cg == nil) {
			continue
		}
		if errors.Is(s.lastErr[what], errTargetGone) && n == s.trailing[what] {
			continue // only the readings after the target exited: no gap
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s could not be read in %d of %d readings (last: %v); those windows' fields are empty", what, n, s.reads, s.lastErr[what]))
	}
	if skipped > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d of the every-%d-th messages left outside the CPU readings and are not in %s", skipped, s.opts.Every, CPUPerMsgFile))
	}
	res.Summary = s.summary(&meta, broker)
	return res, errors.Join(errs...)
}

func (s *Source) summary(m *CPUMeta, broker *int64) string {
	secs := float64(m.Totals.DurationNs) / 1e9
	if secs <= 0 {
		return ""
	}
	var parts []string
	if broker != nil {
		src := s.brokerSrc
		if src == "cgroup" {
			src = fmt.Sprintf("cgroup %s %s", s.info.Version, s.info.Path)
		}
		parts = append(parts, fmt.Sprintf("broker %.2f CPUs (%s)", float64(*broker)/1e9/secs, src))
	}
	if t := m.Totals; t.SystemBusyNs != nil {
		parts = append(parts, fmt.Sprintf("system %.2f of %d CPUs (irq %.2f, softirq %.2f)", float64(*t.SystemBusyNs)/1e9/secs, m.CPUs,
			float64(*t.SystemIRQNs)/1e9/secs, float64(*t.SystemSoftIRQNs)/1e9/secs))
		if t.SystemMinusNs != nil {
			parts = append(parts, fmt.Sprintf("outside the broker %.2f", float64(*t.SystemMinusNs)/1e9/secs))
		}
	}
	if v := m.Totals.BrokerNsPerMsgIn; v != nil {
		parts = append(parts, fmt.Sprintf("%s broker CPU per message", source.FormatNs(int64(*v))))
	}
	return strings.Join(parts, ", ")
}

// writeWindows writes cpu.csv.
func (s *Source) writeWindows(tl *source.Timeline) error {
	f, err := os.Create(filepath.Join(s.env.Out, CPUFile))
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	w.WriteString("t_start_ns,t_end_ns,msgs_in,msgs_out,broker_cgroup_util,broker_proc_util,broker_user_util,broker_sys_util," +
		"system_util,system_irq_util,system_softirq_util,system_minus_broker_util,cpu_ns_per_msg,system_util_frac\n")
	var b []byte
	for i := 1; i < len(s.readings); i++ {
		a, z := &s.readings[i-1], &s.readings[i]
		if z.t <= a.t {
			continue
		}
		dt := float64(z.t - a.t)
		in, out := tl.InBetween(a.t, z.t), tl.OutBetween(a.t, z.t)
		b = strconv.AppendInt(b[:0], a.t, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, z.t, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(in), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(out), 10)
		util := func(ok bool, d int64) {
			b = append(b, ',')
			if ok {
				b = strconv.AppendFloat(b, float64(d)/dt, 'f', 6, 64)
			}
		}
		cg := a.cgOK && z.cgOK
		run := a.runOK && z.runOK
		st := a.statOK && z.statOK
		sys := a.systemOK && z.systemOK
		util(cg, z.cg.total-a.cg.total)
		util(run, z.run-a.run)
		util(st, z.user-a.user)
		util(st, z.sys-a.sys)
		d := z.system.sub(a.system)
		util(sys, d.busy())
		util(sys, d.irq)
		util(sys, d.softirq)
		b0, ok0 := a.brokerNs(s.brokerSrc)
		b1, ok1 := z.brokerNs(s.brokerSrc)
		bok := ok0 && ok1
		util(sys && bok, d.busy()-(b1-b0))
		b = append(b, ',')
		if bok && in > 0 {
			b = strconv.AppendFloat(b, float64(b1-b0)/float64(in), 'f', 1, 64)
		}
		b = append(b, ',')
		if sys && z.ncpu > 0 {
			b = strconv.AppendFloat(b, float64(d.busy())/dt/float64(z.ncpu), 'f', 6, 64)
		}
		b = append(b, '\n')
		w.Write(b)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writePerMsg writes cpu_per_msg.csv: for every Every-th message copy leaving
// the broker, the broker's cumulative CPU U_n at the time T_n it left,
// interpolated linearly between the readings around T_n, and the ZeroMQ
// C_n = (U_n − U_{n−Every}) / (T_n − T_{n−Every}).
func (s *Source) writePerMsg(tl *source.Timeline) (rows, skipped int, err error) {
	f, err := os.Create(filepath.Join(s.env.Out, CPUPerMsgFile))
	if err != nil {
		return 0, 0, err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	w.WriteString("n,t_ns,cpu_ns,c_n\n")
	var ts, us []int64
	for i := range s.readings {
		if v, ok := s.readings[i].brokerNs(s.perMsgSrc); ok {
			ts = append(ts, s.readings[i].t)
			us = append(us, v)
		}
	}
	var b []byte
	havePrev := false
	var prevT, prevU int64
	for n := s.opts.Every; n <= len(tl.Out); n += s.opts.Every {
		t := tl.Out[n-1]
		if len(ts) < 2 || t < ts[0] || t > ts[len(ts)-1] {
			skipped++
			continue
		}
		k := sort.Search(len(ts), func(i int) bool { return ts[i] > t }) - 1
		u := us[k]
		if k+1 < len(ts) {
			u += int64(math.Round(float64(us[k+1]-us[k]) * float64(t-ts[k]) / float64(ts[k+1]-ts[k])))
		}
		b = strconv.AppendInt(b[:0], int64(n), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, t, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, u-us[0], 10)
		b = append(b, ',')
		if havePrev && t > prevT {
			b = strconv.AppendFloat(b, float64(u-prevU)/float64(t-prevT), 'f', 6, 64)
		}
		b = append(b, '\n')
		w.Write(b)
		rows++
		havePrev, prevT, prevU = true, t, u
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return rows, skipped, err
	}
	return rows, skipped, f.Close()
}
