package recfile

// PlatformFile holds the platform constants `brokertrace platform`
// measured (Ginpex's goal-oriented experiments); `calibrate` reads it.
const PlatformFile = "platform.json"

// Platform is platform.json.
type Platform struct {
	Tool       string             `json:"tool"`
	Version    string             `json:"version"`
	Host       Host               `json:"host"`
	CPUModel   string             `json:"cpu_model"`
	StartWall  string             `json:"start_wall"`
	EndWall    string             `json:"end_wall"`
	Quick      bool               `json:"quick"`
	Properties []PlatformProperty `json:"properties"`
	// References are figures of independent tools measured in the same
	// run, beside the property they check (perf bench sched pipe).
	References []PlatformReference `json:"references"`
	// Scheduler is the kernel's own slice setting, for the timeslice's
	// cross-check; nil when no timeslice experiment ran.
	Scheduler *PlatformScheduler `json:"scheduler,omitempty"`
	// Experiments are the experiments that ran, in order, with how their
	// repetitions ended.
	Experiments []PlatformRun `json:"experiments"`
	Warnings    []string      `json:"warnings"`
}

// PlatformReference is an independent tool's figure and how a property
// compares with it.
type PlatformReference struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
	// Value is the tool's own figure in its own unit (perf: usecs/op).
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// PerSwitchNs is the tool's CPU time (its processes' user + system
	// time from wait4) per switch, round trip / 2, and Measured the same
	// quantity from the property's own samples; WallPerSwitchNs is the
	// tool's wall-clock figure per switch (Value / 2), which on a shared
	// machine also counts other tasks' slices.
	PerSwitchNs     float64 `json:"per_switch_ns"`
	WallPerSwitchNs float64 `json:"wall_per_switch_ns"`
	Measured        float64 `json:"measured_ns"`
	Property        string  `json:"property"`
	Variant         string  `json:"variant,omitempty"`
	Ratio           float64 `json:"ratio"` // Measured / PerSwitchNs
	Compared        string  `json:"compared"`
	Error           string  `json:"error,omitempty"`
}

// PlatformScheduler is the kernel's slice setting beside the detected
// timeslice.
type PlatformScheduler struct {
	Settings SchedSettings `json:"settings"`
	// TickNs is the scheduler tick (CLOCK_MONOTONIC_COARSE's resolution,
	// 1/CONFIG_HZ); without HRTICK a slice ends at the first tick after it
	// is used up, so the enforced quantum is the setting rounded up to ticks.
	TickNs int64 `json:"tick_ns"`
	// BaseSliceNs is the setting (EEVDF base_slice_ns, CFS
	// min_granularity_ns); EnforcedNs it rounded up to whole ticks.
	BaseSliceNs int64 `json:"base_slice_ns"`
	EnforcedNs  int64 `json:"enforced_ns"`
	// SchedstatNs is the contending spinner's on-CPU time per run stretch
	// from /proc/PID/task/TID/schedstat during the experiment.
	SchedstatNs float64 `json:"schedstat_ns"`
	DetectedNs  float64 `json:"detected_ns"`
	// RatioSetting = detected / base slice; RatioEnforced = detected /
	// enforced quantum.
	RatioSetting  float64 `json:"ratio_setting"`
	RatioEnforced float64 `json:"ratio_enforced"`
}

// PlatformRun is one experiment's run: samples kept, warm-up samples
// discarded, and why the repetitions stopped.
type PlatformRun struct {
	Name       string  `json:"name"`
	Samples    int     `json:"samples"`
	Warmup     int     `json:"warmup_discarded"`
	Seconds    float64 `json:"seconds"`
	StopReason string  `json:"stop_reason"` // ci, max, time
	Error      string  `json:"error,omitempty"`
}

// PlatformSamplesDir holds one samples file per experiment, NAME.csv.
const PlatformSamplesDir = "platform-samples"

// PlatformSample is one row of platform-samples/NAME.csv: one measured
// value after warm-up, in the experiment's sample unit, and the cluster
// the two-cluster analysis put it in (empty for other analyses).
type PlatformSample struct {
	Seq     int64   `csv:"seq"`
	Value   float64 `csv:"value"`
	Cluster *int64  `csv:"cluster"`
}

// Names of the properties calibrate reads.
const (
	PlatformContextSwitch = "context_switch_ns" // one switch between two threads on one CPU
	PlatformTimeslice     = "timeslice_ns"      // the quantum a CPU-bound thread gets under contention
)

// PlatformProperty is one detected property with its spread and method.
type PlatformProperty struct {
	Name    string  `json:"name"`
	Variant string  `json:"variant,omitempty"` // e.g. same-cpu/pipe
	Value   float64 `json:"value"`
	Unit    string  `json:"unit"`
	N       int     `json:"n"`
	// CI95Low and CI95High bound the mean (Student's t).
	CI95Low  *float64 `json:"ci95_low,omitempty"`
	CI95High *float64 `json:"ci95_high,omitempty"`
	Q1       float64  `json:"q1"`
	Median   float64  `json:"median"`
	Q3       float64  `json:"q3"`
	Method   string   `json:"method"`
	// Sample* describe the raw samples before the analysis turned them
	// into Value (a round trip, a response time…).
	SampleMean float64 `json:"sample_mean"`
	SampleUnit string  `json:"sample_unit,omitempty"`
	// Experiment is the experiment's name; SamplesFile its raw samples,
	// relative to platform.json.
	Experiment  string `json:"experiment"`
	SamplesFile string `json:"samples_file,omitempty"`
}

// Property returns the first property named name (any variant when
// variant is ""), and whether there is one.
func (p *Platform) Property(name, variant string) (PlatformProperty, bool) {
	for _, q := range p.Properties {
		if q.Name == name && (variant == "" || q.Variant == variant) {
			return q, true
		}
	}
	return PlatformProperty{}, false
}
