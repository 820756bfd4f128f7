package collect

import (
	"errors"
	"fmt"
	"strings"

	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// CPUMeta is the source's part of meta.json.
type CPUMeta struct {
	Cgroup CgroupInfo `json:"cgroup"`
	// Missing lists, in words, what could not be read at the start.
	Missing []string `json:"missing"`
	// BrokerCPUSource is the broker CPU that system_minus_broker_util and
	// cpu_ns_per_msg use: cgroup, schedstat or stat.
	BrokerCPUSource string `json:"broker_cpu_source"`
	// ExactBusySource is where the exact busy columns (cpu.csv
	// system_exact_util, cpu_cores.csv busy_exact_util) come from:
	// "cpuidle", "timer_list" where there is no cpuidle, or "" when they
	// are empty and ExactBusyMissing says why.
	// The tick-sampled /proc/stat columns are cross-checks.
	ExactBusySource  string `json:"exact_busy_source"`
	ExactBusyMissing string `json:"exact_busy_missing,omitempty"`
	// ExactBusyRemote lists the CPUs the recorder could not pin a reader
	// to (a cpuset): their residency was read from another CPU, and a
	// window of theirs can be off by the idle period in progress.
	ExactBusyRemote []int64 `json:"exact_busy_remote_cpus,omitempty"`
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
	DurationNs      int64  `json:"duration_ns"`
	CgroupNs        *int64 `json:"cgroup_ns"`
	CgroupUserNs    *int64 `json:"cgroup_user_ns"`
	CgroupSysNs     *int64 `json:"cgroup_sys_ns"`
	SchedstatNs     *int64 `json:"schedstat_ns"`
	SchedstatWaitNs *int64 `json:"schedstat_wait_ns"`
	StatUserNs      *int64 `json:"stat_user_ns"`
	StatSysNs       *int64 `json:"stat_sys_ns"`
	SystemBusyNs    *int64 `json:"system_busy_ns"`
	SystemIRQNs     *int64 `json:"system_irq_ns"`
	SystemSoftIRQNs *int64 `json:"system_softirq_ns"`
	SystemMinusNs   *int64 `json:"system_minus_broker_ns"`
	// The exact busy time of all CPUs (cpuidle), and it minus the broker.
	SystemExactNs      *int64   `json:"system_exact_busy_ns"`
	SystemMinusExactNs *int64   `json:"system_minus_broker_exact_ns"`
	BrokerNsPerMsgIn   *float64 `json:"broker_ns_per_msg"`
}

// Finish writes cpu.csv and cpu_per_msg.csv and closes cpu_cores.csv.
func (s *Source) Finish(tl *source.Timeline) (source.Result, error) {
	res := source.Result{Files: []string{recfile.CPUFile, recfile.CPUPerMsgFile, recfile.CPUCoresFile}}
	meta := CPUMeta{
		Cgroup: s.info, Missing: s.missing, BrokerCPUSource: s.brokerSrc, PerMsgSource: s.perMsgSrc,
		Every: s.opts.Every, Samples: s.kept, Reads: s.reads, Failures: s.fails,
		Threads: s.proc.seen, ThreadsEnded: s.proc.exited,
		ExactBusyMissing: s.idleWhy,
	}
	if s.idle != nil {
		meta.ExactBusySource = s.idle.source
		meta.ExactBusyRemote = s.idle.remote()
		s.idle.close()
	}
	if meta.Missing == nil {
		meta.Missing = []string{}
	}
	if n := len(s.readings); n > 0 {
		meta.CPUs = s.readings[n-1].ncpu
		meta.Totals.DurationNs = s.readings[n-1].t - s.firstT
	}
	var errs []error
	if err := s.closeCores(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", recfile.CPUCoresFile, err))
	}
	winErr, perMsgErr := s.closeFiles(tl)
	if winErr != nil {
		errs = append(errs, fmt.Errorf("%s: %w", recfile.CPUFile, winErr))
	}
	if perMsgErr != nil {
		errs = append(errs, fmt.Errorf("%s: %w", recfile.CPUPerMsgFile, perMsgErr))
	}
	rows, skipped := s.perMsg.rows, s.perMsg.skipped
	meta.PerMsgRows, meta.PerMsgSkipped = rows, skipped
	broker := s.totals(&meta.Totals, tl.Ins())
	res.Meta = meta
	res.Warnings = s.warnings(skipped)
	res.Summary = s.summary(&meta, broker)
	return res, errors.Join(errs...)
}

// totals fills t from the first and last readings of each counter, and
// returns the broker CPU over the recording (nil when unknown). in is the
// number of messages that entered the broker.
func (s *Source) totals(t *Totals, in int) (broker *int64) {
	cg := func(v func(*reading) int64) *int64 { return s.delta(cCgroup, v) }
	t.CgroupNs = cg(func(r *reading) int64 { return r.cg.total })
	t.CgroupUserNs = cg(func(r *reading) int64 { return r.cg.user })
	t.CgroupSysNs = cg(func(r *reading) int64 { return r.cg.sys })
	t.SchedstatNs = s.delta(cSchedstat, func(r *reading) int64 { return r.run })
	t.SchedstatWaitNs = s.delta(cSchedstat, func(r *reading) int64 { return r.wait })
	t.StatUserNs = s.delta(cStat, func(r *reading) int64 { return r.user })
	t.StatSysNs = s.delta(cStat, func(r *reading) int64 { return r.sys })
	t.SystemBusyNs = s.delta(cSystem, func(r *reading) int64 { return r.system.busy() })
	t.SystemIRQNs = s.delta(cSystem, func(r *reading) int64 { return r.system.irq })
	t.SystemSoftIRQNs = s.delta(cSystem, func(r *reading) int64 { return r.system.softirq })
	if c, ok := counterOf(s.brokerSrc); ok {
		broker = s.delta(c, func(r *reading) int64 { v, _ := r.brokerNs(s.brokerSrc); return v })
	}
	if broker != nil && t.SystemBusyNs != nil {
		d := *t.SystemBusyNs - *broker
		t.SystemMinusNs = &d
	}
	t.SystemExactNs = s.exactBusy()
	if broker != nil && t.SystemExactNs != nil {
		d := *t.SystemExactNs - *broker
		t.SystemMinusExactNs = &d
	}
	if broker != nil && in > 0 {
		v := float64(*broker) / float64(in)
		t.BrokerNsPerMsgIn = &v
	}
	return broker
}

// exactBusy is all CPUs' exact busy time between the first and the last
// reading of every CPU's busy clock.
func (s *Source) exactBusy() *int64 {
	first, last := s.ends.span(cBusy)
	if first == nil || first.busyN != last.busyN {
		return nil
	}
	d := last.busy - first.busy
	return &d
}

// delta is the change of counter c between the first and the last reading
// that read it.
func (s *Source) delta(c counter, v func(*reading) int64) *int64 {
	first, last := s.ends.span(c)
	if first == nil {
		return nil
	}
	d := v(last) - v(first)
	return &d
}

// warnings says what was missing from the start, what the cgroup counts
// beside the broker, which counters failed during the recording, and how
// many every-N-th messages fell outside the readings.
func (s *Source) warnings(skipped int) []string {
	warns := append([]string(nil), s.missing...)
	if s.idleWhy != "" {
		warns = append(warns, "the exact busy columns (system_exact_util, busy_exact_util) are empty: "+s.idleWhy+"; only /proc/stat's tick-sampled busy time is recorded")
	}
	if s.info.OtherProcesses > 0 {
		warns = append(warns, fmt.Sprintf("cgroup %s also holds %d other processes; broker_cgroup_util counts them too", s.info.Path, s.info.OtherProcesses))
	}
	for _, what := range []string{"cgroup", "stat", "schedstat", "system", "cpuidle"} {
		n := s.fails[what]
		if n == 0 || (what == "cgroup" && s.cg == nil) {
			continue
		}
		if errors.Is(s.lastErr[what], errTargetGone) && n == s.trailing[what] {
			continue // only the readings after the target exited: no gap
		}
		warns = append(warns, fmt.Sprintf("%s could not be read in %d of %d readings (last: %v); those windows' fields are empty", what, n, s.reads, s.lastErr[what]))
	}
	if skipped > 0 {
		warns = append(warns, fmt.Sprintf("%d of the every-%d-th messages left outside the CPU readings and are not in %s", skipped, s.opts.Every, recfile.CPUPerMsgFile))
	}
	return warns
}

// summary is the source's headline: the broker's and the system's CPUs'
// worth over the recording, and the broker's CPU per message.
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
	cpus := func(ns int64) float64 { return float64(ns) / 1e9 / secs }
	t := m.Totals
	if t.SystemExactNs != nil {
		parts = append(parts, fmt.Sprintf("system %.2f of %d CPUs (cpuidle)", cpus(*t.SystemExactNs), m.CPUs))
		if t.SystemMinusExactNs != nil {
			parts = append(parts, fmt.Sprintf("outside the broker %.2f", cpus(*t.SystemMinusExactNs)))
		}
	}
	if t.SystemBusyNs != nil {
		parts = append(parts, fmt.Sprintf("tick-sampled /proc/stat: system %.2f (irq %.2f, softirq %.2f)", cpus(*t.SystemBusyNs),
			cpus(*t.SystemIRQNs), cpus(*t.SystemSoftIRQNs)))
		if t.SystemMinusNs != nil {
			parts = append(parts, fmt.Sprintf("outside the broker %.2f", cpus(*t.SystemMinusNs)))
		}
	}
	if v := m.Totals.BrokerNsPerMsgIn; v != nil {
		parts = append(parts, fmt.Sprintf("%s broker CPU per message", source.FormatNs(int64(*v))))
	}
	return strings.Join(parts, ", ")
}
