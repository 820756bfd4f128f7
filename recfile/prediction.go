package recfile

import "fmt"

// PredictionFile is what `brokertrace predict` writes: the calibrated
// model simulated at each rate, beside what the sweep measured there.
const PredictionFile = "prediction.json"

// Prediction is prediction.json.
type Prediction struct {
	Tool        string `json:"tool"`
	Version     string `json:"version"`
	Created     string `json:"created_wall"`
	Calibration string `json:"calibration"` // calibration.json, as given
	Sweep       string `json:"sweep,omitempty"`
	// SweepFound: the sweep's step directories could be read (measured
	// latency distributions); without them only the calibration's step
	// summaries are compared.
	SweepFound bool              `json:"sweep_found"`
	Options    PredictionOptions `json:"options"`
	Model      PredictionModel   `json:"model"`
	Rows       []PredictionRow   `json:"rows"`
	// Saturation compares the model's highest throughput (simulated far
	// beyond the measured peak) with the measured peak_throughput.
	Saturation PredictionSaturation `json:"saturation"`
	Goals      []PredictionGoal     `json:"goals"`
	// Repeat says how well the measurement repeats, with --against only:
	// a model cannot be judged tighter than that.
	Repeat   *PredictionRepeat `json:"repeatability,omitempty"`
	Warnings []string          `json:"warnings"`
}

// PredictionOptions are what predict was asked.
type PredictionOptions struct {
	Pattern  string `json:"pattern"` // as-measured, regular, bursty, measured
	Burst    int    `json:"burst,omitempty"`
	Messages int    `json:"messages"` // simulated per rate, after warm-up
	Warmup   int    `json:"warmup"`
	Seed     uint64 `json:"seed"`
	Demand   string `json:"demand"` // empirical, exponential, deterministic
	// QueueCapacity bounds the messages inside the model (0: unbounded).
	QueueCapacity int `json:"queue_capacity"`
	// Against is the sweep measured against when it is not the
	// calibration's own (cross-validation: another ladder, another day).
	Against string `json:"against,omitempty"`
}

// PredictionModel is the model as simulated.
type PredictionModel struct {
	CPUs            int               `json:"cpus"`
	Stages          []PredictionStage `json:"stages"`
	SwitchPenaltyNs float64           `json:"context_switch_penalty_ns"`
	QuantumNs       float64           `json:"quantum_ns"`
	GCThreshold     int               `json:"gc_threshold_msgs"`
	GCPauseNs       float64           `json:"gc_pause_ns"`
	// The cost per wake-up (calibrate's wake-up fit; 0 without it).
	WakePenaltyNs float64 `json:"wake_penalty_ns"`
	WakeLatencyNs float64 `json:"wake_latency_ns"`
	SpinNs        float64 `json:"spin_ns"`
	PathLatencyNs float64 `json:"path_latency_ns"`
	// SystemWakeNs: CPU outside the broker per wake-up of its threads.
	SystemWakeNs float64 `json:"system_wake_ns"`
}

// PredictionStage is one timed place as simulated.
type PredictionStage struct {
	Name    string  `json:"name"`
	Outside bool    `json:"outside"`
	Demand  string  `json:"demand"` // the distribution used
	MeanNs  float64 `json:"mean_ns"`
	Samples int     `json:"samples,omitempty"`
}

// PredictionRow is one rate: predicted, measured (when a sweep step has
// the same pattern and asked rate) and their errors.
type PredictionRow struct {
	Rate    float64 `json:"rate"` // msg/s asked
	Pattern string  `json:"pattern"`
	Burst   int     `json:"burst,omitempty"`
	// Step is the matching sweep step's Index, -1 when none.
	Step      int                `json:"step"`
	Predicted PredictionValues   `json:"predicted"`
	Measured  *PredictionValues  `json:"measured,omitempty"`
	Errors    *PredictionErrors  `json:"errors,omitempty"`
	SimStats  PredictionSimStats `json:"sim"`
}

// PredictionValues are the quantities compared.
type PredictionValues struct {
	Throughput float64 `json:"throughput"` // msg/s
	// BrokerUtil in CPUs' worth (the broker's stages; measured: sweep's
	// broker_util); SystemUtil adds the system place (measured: all CPUs'
	// busy time, which also holds the load generator's).
	BrokerUtil float64 `json:"broker_util"`
	// JITUtil, measured only, is the part of BrokerUtil the JVM's JIT
	// compiler threads took (sweep's jit_util): a model of a warmed-up
	// broker is judged against WarmUtil.
	JITUtil float64 `json:"jit_util,omitempty"`
	// ArrivalCV is the coefficient of variation of the gaps between
	// arrivals (measured: sweep's arrival_cv, nil without it; predicted:
	// the simulated arrivals', 0 for regular, 3 for bursts of ten).
	ArrivalCV      *float64 `json:"arrival_cv,omitempty"`
	SystemUtil     float64  `json:"system_util"`
	SwitchesPerMsg float64  `json:"switches_per_msg"`
	// WakeupsPerMsg: wake-ups of blocked broker threads per message
	// (measured: sweep's wakeups_per_s over its achieved rate, the
	// threads' voluntary switches; predicted: the model's). The cost law
	// of UtilParts is evaluated at the measured one.
	WakeupsPerMsg float64      `json:"wakeups_per_msg,omitempty"`
	Latency       LatencyStats `json:"latency"`
	// LatencyBins is the latency distribution: logarithmic bins, 20 per
	// decade, empty ones left out.
	LatencyBins []PredictionBin `json:"latency_bins,omitempty"`
	Saturated   bool            `json:"saturated"`
}

// WarmUtil is BrokerUtil without the JIT compiler's CPU.
func (v *PredictionValues) WarmUtil() float64 { return v.BrokerUtil - v.JITUtil }

// PredictionBin is one histogram bin: [lo_ns, hi_ns).
type PredictionBin struct {
	LoNs  float64 `json:"lo_ns"`
	HiNs  float64 `json:"hi_ns"`
	Count int64   `json:"count"`
}

// PredictionErrors are predicted against measured at one rate.
type PredictionErrors struct {
	ThroughputPct float64 `json:"throughput_pct"` // 100·(pred/meas − 1)
	BrokerUtilPP  float64 `json:"broker_util_pp"` // 100·(pred − meas), percentage points of one CPU
	MedianRatio   float64 `json:"median_ratio"`   // pred p50 / meas p50
	P99Ratio      float64 `json:"p99_ratio"`
	// The goals at this rate: utilisation within 3 pp (only below
	// saturation: UtilChecked), median within 1.5× and p99 within 3×
	// (only below 80% utilisation: LatencyChecked).
	UtilChecked    bool `json:"util_checked"`
	UtilOK         bool `json:"util_ok"`
	LatencyChecked bool `json:"latency_checked"`
	MedianOK       bool `json:"median_ok"`
	P99OK          bool `json:"p99_ok"`
	// UtilParts splits BrokerUtilPP where the step's wake-ups were
	// measured and the calibration has the cost per wake-up; nil
	// otherwise.
	UtilParts *PredictionUtilParts `json:"broker_util_parts,omitempty"`
}

// PredictionUtilParts splits a row's utilisation error in two at the
// calibrated cost law, U = background + msg_cost × messages/s +
// wake_cost × (wake-ups/s − background_wakeups), evaluated at the
// step's measured rate and wake-ups (LawUtil). LawPP = 100·(LawUtil −
// measured): how far the broker's own CPU per message and per wake-up
// at this step were from the constants fitted — the broker's costs
// changed (batching, a cold CPU, a compiler). SimulationPP =
// 100·(predicted − LawUtil): what the simulated pipeline does
// differently from the broker at the same costs — how often its threads
// wake, poll and park (SwitchesPerMsg, predicted against measured). The
// two add up to BrokerUtilPP.
type PredictionUtilParts struct {
	LawUtil      float64 `json:"law_util"` // CPUs
	LawPP        float64 `json:"law_pp"`
	SimulationPP float64 `json:"simulation_pp"`
}

// PredictionSimStats say how the simulation went at one rate.
type PredictionSimStats struct {
	Messages      int64     `json:"messages"` // measured (after warm-up)
	OfferedRate   float64   `json:"offered_rate"`
	InputWaitNs   float64   `json:"input_wait_mean_ns"` // outside the broker: GC, full queue
	MaxInBroker   int       `json:"max_in_broker"`
	Events        int64     `json:"events"`
	ElapsedNs     int64     `json:"elapsed_ns"` // wall time of the simulation
	StageUtil     []float64 `json:"stage_util"`
	LatencyClamps int64     `json:"latency_clamped,omitempty"`
}

// PredictionSaturation: predicted and measured saturation throughput.
type PredictionSaturation struct {
	Predicted float64 `json:"predicted"` // msg/s
	Measured  float64 `json:"measured"`  // msg/s, 0 if unknown
	// Reached: a measured step saturated, so Measured is the broker's
	// saturation throughput; otherwise it is only a lower bound.
	Reached bool `json:"reached"`
	// HeldByLoad: steps saturated, but each because the load's CPUs were
	// full, not the broker's (SweepStep.Bottleneck): Measured is a bound.
	HeldByLoad bool    `json:"held_by_load,omitempty"`
	ErrorPct   float64 `json:"error_pct"`
	OK         bool    `json:"ok"` // within 5% (reached), or not below the bound
	// The same split as a row's UtilParts: LawPredicted (msg/s) is the
	// fitted cost law's capacity at the wake-ups per message the broker
	// had at its peak step (WakeupsPerMsg): (CPUs − background +
	// wake_cost × background_wakeups) / (msg_cost + wake_cost ×
	// WakeupsPerMsg); ModelWakeupsPerMsg the model's at its saturation.
	// Absent without the cost law or the peak step's wake-ups.
	LawPredicted       float64 `json:"law_predicted,omitempty"`
	WakeupsPerMsg      float64 `json:"wakeups_per_msg,omitempty"`
	ModelWakeupsPerMsg float64 `json:"model_wakeups_per_msg,omitempty"`
}

// PredictionRepeat compares the sweep predict --against judged on with
// the calibrating sweep, measurement with measurement.
type PredictionRepeat struct {
	// Compared is how many rows below saturation had a step of the
	// calibrating sweep, same pattern and below saturation, at a rate on
	// either side to interpolate from.
	Compared int `json:"compared"`
	// WorstPP is the largest difference, in percentage points of a CPU,
	// between a row's measured broker utilisation and the calibrating
	// sweep's at the same rate and pattern (interpolated linearly in the
	// rate), at Pattern and Rate; Measured and Calibrating are the two.
	WorstPP     float64 `json:"worst_pp"`
	Pattern     string  `json:"pattern,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	Measured    float64 `json:"measured,omitempty"`
	Calibrating float64 `json:"calibrating,omitempty"`
	// ModelPP is the model's error at the same row, beside it.
	ModelPP float64 `json:"model_pp,omitempty"`
	// PeakPct compares the two sweeps' saturation throughputs (this
	// sweep's over the calibrating one's, − 1, in %) when both saturated
	// with the broker's CPU full; PeakCompared says they did.
	PeakPct      float64 `json:"peak_pct,omitempty"`
	PeakCompared bool    `json:"peak_compared"`
}

// PredictionGoal is one of the goals over all rates.
type PredictionGoal struct {
	Name   string `json:"name"`
	Met    bool   `json:"met"`
	Detail string `json:"detail"` // the worst case and its distance
}

// Text is the repeatability in one line.
func (r *PredictionRepeat) Text() string {
	if r.Compared == 0 {
		return "no row of this sweep lies between two rates of the calibrating sweep (same pattern, below saturation): the measurement's repeatability is unknown"
	}
	s := fmt.Sprintf("the broker's utilisation measured here differs from the calibrating sweep's at the same rate and pattern by up to %+.1f pp over %d rates (%s %.0f msg/s: %.3f here, %.3f there, interpolated; the model's error there %+.1f pp)",
		r.WorstPP, r.Compared, r.Pattern, r.Rate, r.Measured, r.Calibrating, r.ModelPP)
	if r.PeakCompared {
		s += fmt.Sprintf("; saturation %+.1f%% from the calibrating sweep's", r.PeakPct)
	}
	return s
}
