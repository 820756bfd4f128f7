package recfile

// OverheadFile is the result of `brokertrace overhead`: every run and, per
// configuration, the statistics over its runs (MooBench method).
const OverheadFile = "overhead.json"

// Overhead is overhead.json.
type Overhead struct {
	Tool      string          `json:"tool"`
	Version   string          `json:"version"`
	Host      Host            `json:"host"`
	CPUModel  string          `json:"cpu_model"`
	Broker    string          `json:"broker"`         // nats, activemq or the command's name
	Command   []string        `json:"broker_command"` // how each fresh broker was started
	Options   OverheadOptions `json:"options"`
	StartWall string          `json:"start_wall"`
	EndWall   string          `json:"end_wall"`
	// Configs holds one entry per configuration, in the order run.
	Configs []OverheadConfig `json:"configs"`
	// Runs holds every run, in the order run (configurations interleaved).
	Runs []OverheadRun `json:"runs"`
	// Stop says why the rounds ended: the runs asked for, the CI goals met
	// (and after how many rounds), or MaxRuns reached with the widest CI.
	Stop string `json:"stop,omitempty"`
}

// OverheadOptions are what the experiment was asked to do.
type OverheadOptions struct {
	Runs          int      `json:"runs"`              // fresh broker processes per configuration
	Configs       []string `json:"configs"`           // configuration names, in order
	WarmupCount   int      `json:"warmup_count"`      // messages sent as fast as possible first, discarded
	Count         int      `json:"count"`             // messages of the saturation load
	Size          int      `json:"size"`              // body size in bytes, marker included
	Rate          float64  `json:"rate"`              // msg/s of the latency load
	LatencyNs     int64    `json:"latency_ns"`        // how long the latency load sends
	LatencyWarmNs int64    `json:"latency_warmup_ns"` // its first part, left out
	BrokerCPUs    string   `json:"broker_cpus"`       // taskset list the broker is pinned to
	LoadCPUs      string   `json:"load_cpus"`         // taskset list the load generator is pinned to
	TracerCPUs    string   `json:"tracer_cpus"`       // taskset list of the tracer; "" = unpinned
	CPURate       float64  `json:"cpu_rate"`          // msg/s of the fixed-rate CPU phase
	CPUNs         int64    `json:"cpu_ns"`            // how long the CPU phase sends
	ProgStats     bool     `json:"prog_stats"`        // the kernel's BPF run-time statistics on in the CPU phase
	// Payload is the loads' kind of body (brokertrace load --payload):
	// what the marker scan and the frame parser read, and so their
	// in-kernel costs, differ with it. "" in files from before the option:
	// fixed.
	Payload string `json:"payload,omitempty"`
	// Rounds go on past Runs, up to MaxRuns, until every traced
	// configuration's paired throughput ratio has a 95% CI within
	// ±RatioCI and its paired added latency one no wider than
	// LatencyCINs (each goal only when set).
	RatioCI     float64 `json:"ratio_ci,omitempty"`
	LatencyCINs float64 `json:"latency_ci_ns,omitempty"`
	MaxRuns     int     `json:"max_runs,omitempty"`
}

// OverheadStats are MooBench's statistics of one quantity: mean with the
// 95% confidence interval of the mean (Student's t), lower median and the
// quartiles (nearest rank). CI95Low/High are absent for fewer than two
// values.
type OverheadStats struct {
	N        int      `json:"n"`
	Mean     float64  `json:"mean"`
	CI95Low  *float64 `json:"ci95_low,omitempty"`
	CI95High *float64 `json:"ci95_high,omitempty"`
	Q1       float64  `json:"q1"`
	Median   float64  `json:"median"`
	Q3       float64  `json:"q3"`
	Min      float64  `json:"min"`
	Max      float64  `json:"max"`
}

// OverheadRun is one run: a fresh broker, the configuration's tracer, a
// discarded warm-up, the latency load at a fixed rate, the CPU phase at
// another, the saturation load.
type OverheadRun struct {
	Config string `json:"config"`
	Run    int    `json:"run"` // 1-based, per configuration
	Dir    string `json:"dir"` // the run's files, relative to the output directory
	// Error says why the run failed; a failed run is kept here and left
	// out of the statistics.
	Error string `json:"error,omitempty"`

	// Saturation: messages received / (last receive − first send).
	Sent             int     `json:"sat_sent"`
	Received         int     `json:"sat_received"`
	ThroughputPerSec float64 `json:"throughput_per_sec"`

	// End-to-end latency of the fixed-rate load, t_recv − t_intended of its
	// non-warm-up messages.
	LatSent       int     `json:"lat_sent"`
	LatReceived   int     `json:"lat_received"`
	LatencyMedian float64 `json:"latency_median_ns"`
	LatencyMean   float64 `json:"latency_mean_ns"`

	// The tracer's own cost (absent in T): CPU (user + system, from wait4)
	// while the loads ran, as a share of one core, its start-up CPU before
	// it was ready, and its peak resident set.
	TracerCPUPct      float64 `json:"tracer_cpu_pct"`
	TracerCPUNs       int64   `json:"tracer_cpu_ns"`
	TracerStartCPUNs  int64   `json:"tracer_start_cpu_ns"`
	TracerMaxRSSBytes int64   `json:"tracer_max_rss_bytes"`
	// OutputBytes is the size of what the tracer wrote (recording, pcap,
	// bpftrace's lines).
	OutputBytes int64 `json:"output_bytes"`

	// The fixed-rate CPU phase: messages sent and received, its length
	// (from just before the load started to just after it ended) and the
	// tracer's CPU (utime + stime of /proc/PID/stat) over exactly that
	// time, absent in T.
	CPUSent      int      `json:"cpu_sent"`
	CPUReceived  int      `json:"cpu_received"`
	CPUWallNs    int64    `json:"cpu_wall_ns"`
	CPUTracerNs  *int64   `json:"cpu_tracer_ns,omitempty"`
	CPUTracerPct *float64 `json:"cpu_tracer_pct,omitempty"`
	// Progs is the in-kernel cost of each BPF program the tracer held over
	// the CPU phase (with --prog-stats; none in T).
	Progs []OverheadProg `json:"progs,omitempty"`

	// From brokertrace's meta.json: events lost in the kernel (ring buffer
	// full, program runs skipped), copies matched out of the copies the
	// load generator received in the run, and the warnings.
	Dropped      uint64   `json:"dropped"`
	Copies       uint64   `json:"copies_matched"`
	CopiesSent   int      `json:"copies_expected"`
	MatchedShare *float64 `json:"matched_share,omitempty"`
	Warnings     []string `json:"warnings,omitempty"`
}

// OverheadConfig is one configuration's statistics over its runs.
type OverheadConfig struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Runs        int    `json:"runs"` // runs that completed
	Failed      int    `json:"failed_runs"`

	Throughput OverheadStats `json:"throughput_per_sec"` // over runs
	// ThroughputRatio is the mean throughput over T's (absent without T).
	ThroughputRatio *float64 `json:"throughput_ratio,omitempty"`
	// Latency pools every measured message of every run (ns); LatencyRuns
	// are the runs' medians, whose CI says how far runs disagree.
	Latency     OverheadStats `json:"latency_ns"`
	LatencyRuns OverheadStats `json:"latency_run_medians_ns"`
	// LatencyAddedNs is the pooled median minus T's (absent without T).
	LatencyAddedNs *float64 `json:"latency_added_ns,omitempty"`
	// RatioPaired is the throughput over T's of the same round, over the
	// rounds both completed; LatencyAddedPaired the run's median latency
	// minus T's of the same round (ns). A round's two runs share the
	// machine's state of the moment, so these CIs are far narrower than
	// those of two separate means (n = 0 for T and without T).
	RatioPaired        OverheadStats `json:"throughput_ratio_paired"`
	LatencyAddedPaired OverheadStats `json:"latency_added_paired_ns"`

	TracerCPUPct OverheadStats `json:"tracer_cpu_pct"`
	// CPUTracerPct is the tracer's CPU over the fixed-rate phase, over the
	// runs (n = 0 in T).
	CPUTracerPct      OverheadStats `json:"cpu_tracer_pct"`
	TracerMaxRSSBytes int64         `json:"tracer_max_rss_bytes"` // largest over runs
	Dropped           uint64        `json:"dropped"`              // summed over runs
	// MatchedShare is the smallest share of copies matched in any run
	// (absent for configurations that match nothing).
	MatchedShare *float64 `json:"matched_share_min,omitempty"`
	// Progs sums each program's cost over the runs: runs and ns added up,
	// ns_per_msg over the CPU phases' messages added up.
	Progs []OverheadProg `json:"progs,omitempty"`
}

// OverheadProg is the in-kernel cost of one BPF program over the CPU
// phase, from the kernel's run-time statistics (BPF_ENABLE_STATS).
type OverheadProg struct {
	// Source is the brokertrace source the program belongs to (sockio,
	// sched, sockq, netstack) or, for another tool's, the tool.
	Source string `json:"source"`
	// Name is the program's function name from its BTF or, without BTF,
	// the kernel's (15 characters at most).
	Name string `json:"name"`
	ID   uint32 `json:"id,omitempty"`
	Runs uint64 `json:"runs"`
	Ns   uint64 `json:"ns"` // total run time
	// NsPerRun is Ns / Runs; NsPerMsg is Ns over the messages the broker
	// handled (received by the load generator) in the phase.
	NsPerRun float64 `json:"ns_per_run"`
	NsPerMsg float64 `json:"ns_per_msg"`
	// Messages is the count NsPerMsg divides by.
	Messages int `json:"messages"`
}
