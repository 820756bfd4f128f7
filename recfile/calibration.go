package recfile

// CalibrationFile holds the parameters of the ICPE'14 §4 broker model
// calibrated from a sweep (`brokertrace calibrate`), each with its unit,
// how it was derived and from which steps. Model exporters and `predict`
// read it.
const CalibrationFile = "calibration.json"

// Calibration is calibration.json.
type Calibration struct {
	Tool    string   `json:"tool"`
	Version string   `json:"version"`
	Created string   `json:"created_wall"`
	Sweep   string   `json:"sweep"` // the sweep directory, as given
	Host    Host     `json:"host"`
	Broker  string   `json:"broker"` // the broker's comm
	Command []string `json:"broker_command,omitempty"`
	// Protocol and SizeBytes of the sweep's load.
	Protocol  string `json:"protocol"`
	SizeBytes int    `json:"size_bytes"`
	// CPUs the broker could run on during the sweep.
	CPUs int `json:"cpus"`
	// Params holds every §4.4 parameter (names: the Cal* constants), in
	// the paper's order, each with its provenance.
	Params []CalParam `json:"params"`
	// Stages is the pipeline in the order a message passes through it:
	// the thread(s) that read (role "reads"), those between ("between"),
	// the thread(s) that write ("writes"), then "system" ("outside": the
	// kernel's work outside the broker's threads).
	Stages []CalStage `json:"stages"`
	// Steps are the sweep steps the calibration read, with what was
	// measured there (predict compares against them).
	Steps []SweepStep `json:"steps"`
	// Platform is the platform.json whose constants were used; "" if none
	// (then the kernel's settings were used, and the params say so).
	Platform string   `json:"platform,omitempty"`
	Warnings []string `json:"warnings"`
}

// Names of Calibration.Params every calibration has.
const (
	CalPeakThroughput = "peak_throughput"        // msg/s: the highest achieved rate
	CalDemandPerMsg   = "demand_per_msg"         // ns: 1 / peak_throughput
	CalSystemShare    = "system_share"           // 1: CPU outside the broker / the broker's
	CalDemandScale    = "demand_scale"           // 1: measured stage demands × scale sum to demand_per_msg
	CalRatePeakUtil   = "rate_peak_util"         // msg/s: the lowest rate at peak utilisation
	CalPenalties      = "switch_penalties"       // 1: k, penalties per message at rate_peak_util
	CalSwitchPenalty  = "context_switch_penalty" // ns: c = (1/rate_peak_util − 1/peak_throughput) / k
	CalQuantum        = "quantum"                // ns: q
	CalGCThreshold    = "gc_threshold_msgs"      // messages between pauses; 0: no pauses seen
	CalGCPause        = "gc_pause"               // ns: mean pause
)

// CalParam is one parameter.
type CalParam struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"` // msg/s, ns, messages, 1
	// Derivation says how, in words with the formula and the values used.
	Derivation string `json:"derivation"`
	// Steps are the Index of the sweep steps it came from.
	Steps []int `json:"steps,omitempty"`
	// Source: sweep, kernel (a setting read from the kernel), platform
	// (platform.json), or default (none measured; the value is assumed).
	Source string `json:"source"`
}

// CalStage is one timed place of the model: a pipeline stage and the
// threads that make it.
type CalStage struct {
	Name    string   `json:"name"` // the model's place: accept-msg, process, dispatch, system
	Role    string   `json:"role"` // reads, between, writes, outside
	Threads []string `json:"threads,omitempty"`
	// MeanNs is the model's demand per message: upper decile discarded,
	// scaled by demand_scale.
	MeanNs        float64 `json:"mean_ns"`
	RawMeanNs     float64 `json:"raw_mean_ns"`
	TrimmedMeanNs float64 `json:"trimmed_mean_ns"`
	// DemandFile is the empirical distribution the model draws from,
	// relative to calibration.json: demand_ns per line (trimmed, scaled),
	// in the order measured.
	DemandFile string `json:"demand_file,omitempty"`
	Samples    int    `json:"samples"`
	Derivation string `json:"derivation"`
	Steps      []int  `json:"steps,omitempty"`
}

// Param returns the parameter named name, and whether there is one.
func (c *Calibration) Param(name string) (CalParam, bool) {
	for _, p := range c.Params {
		if p.Name == name {
			return p, true
		}
	}
	return CalParam{}, false
}
