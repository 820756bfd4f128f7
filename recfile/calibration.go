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
	Platform string `json:"platform,omitempty"`
	// Pauses are the stretches where the broker stopped reading while
	// bytes waited in its sockets: where gc_threshold_msgs and gc_pause
	// come from.
	Pauses CalPauses `json:"pauses"`
	// Coalescing is per step: how messages were packed into packets and
	// skbs (ICPE'14 §3.3, Fig. 10), for a model that feeds the measured
	// arrival pattern rather than modelling TCP.
	Coalescing []CalCoalescing `json:"coalescing"`
	Warnings   []string        `json:"warnings"`
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

	CalRatePeakThroughput = "rate_peak_throughput" // msg/s: the rate of the step with the peak throughput
	CalContextSwitchCost  = "context_switch_cost"  // ns: one real switch (platform.json), beside the model's c
)

// Names of the cost-per-wake-up parameters (calibrate's wake-up fit):
// the broker's CPU = background + msg_cost × messages/s + wake_cost ×
// wake-ups/s, fitted on the calibrating steps' windows; the model pays
// wake_penalty per wake-up it makes and spins for spin before parking.
const (
	CalMsgCost    = "msg_cost"   // ns: CPU per message without its wake-ups
	CalWakeCost   = "wake_cost"  // ns: CPU per measured wake-up of a broker thread
	CalBackground = "background" // CPUs: the broker's CPU without messages
	// CalBackgroundWakes: the broker threads' wake-ups without messages
	// (1/s): the fit's wake-ups are those beyond it.
	CalBackgroundWakes = "background_wakeups"
	CalWakePenalty     = "wake_penalty" // ns: what the model pays per wake-up it makes
	CalSpin            = "spin"         // ns: how long the model's idle CPU polls before parking
	CalWakeLatency     = "wake_latency" // ns: how late a thread woken onto a parked CPU starts
	CalPathLatency     = "path_latency" // ns: latency in a message's path the model's stages leave out
	// CalHandOffs: the broker threads' wake-ups per message at a peak
	// that filled its CPUs, which the stages' demands carry at wake_cost
	// each (1; 0: the peak did not fill them).
	CalHandOffs = "hand_offs"

	CalSystemMsgCost  = "system_msg_cost"  // ns: CPU outside the broker per message, the system stage's mean
	CalSystemWakeCost = "system_wake_cost" // ns: CPU outside the broker per wake-up of a broker thread
)

// CalPauses are the pauses found in the steps below saturation.
type CalPauses struct {
	// MinNs is the shortest stall counted as a pause.
	MinNs int64 `json:"min_ns"`
	Steps []int `json:"steps,omitempty"`
	// All the pauses found, of every class (the fields of CalPauseClass).
	CalPauseClass
	// Evidence is what told GC pauses from other stalls: "gc_stints.csv" (the
	// on-CPU stints of the JVM's GC and VM threads, gc_stints.csv), or ""
	// when the recordings had none (then no pause is modelled, and the
	// warnings say why).
	Evidence string `json:"evidence"`
	// GCShareMin: a pause is of class gc when the JVM's GC or VM threads
	// were on a CPU for at least this share of it.
	GCShareMin float64 `json:"gc_share_min"`
	// GC are the pauses of class gc (they make gc_threshold_msgs and
	// gc_pause), Stalls those of class stall (the kernel, the scheduler,
	// the load: not modelled); Unclassified counts the pauses without
	// evidence either way.
	GC           CalPauseClass `json:"gc"`
	Stalls       CalPauseClass `json:"stall"`
	Unclassified int           `json:"unclassified"`
	// MessagesChecked are the first copies whose t_arrive_ns was known;
	// NoArrive those without it (not checked; counted, never dropped
	// silently).
	MessagesChecked int64 `json:"messages_checked"`
	NoArrive        int64 `json:"messages_without_arrive"`
	// File lists every pause (step, start, end, duration, messages since
	// the previous one), relative to calibration.json.
	File string `json:"file,omitempty"`
	// With a JVM GC log (calibrate --gc-log), its stop-the-world pauses
	// in the same windows, and how they compare with the pauses above:
	// GCLogLong of them last at least MinNs, GCLogFound of those overlap
	// a pause found in the kernel's data, KernelOnGC of the pauses found
	// overlap a GC pause.
	GCLog                  string  `json:"gc_log,omitempty"`
	GCLogPauses            int     `json:"gc_log_pauses,omitempty"`
	GCLogTotalNs           int64   `json:"gc_log_total_ns,omitempty"`
	GCLogMsgsBetweenMedian float64 `json:"gc_log_msgs_between_median,omitempty"`
	GCLogLong              int     `json:"gc_log_long,omitempty"`
	GCLogFound             int     `json:"gc_log_found,omitempty"`
	KernelOnGC             int     `json:"kernel_on_gc,omitempty"`
}

// CalPauseClass summarises pauses: how many, how far apart, how long.
type CalPauseClass struct {
	// Count is the pauses; Intervals the stretches between two of them
	// in one step (the messages before a step's first pause are not an
	// interval: when the previous pause was is unknown).
	Count     int `json:"count"`
	Intervals int `json:"intervals"`
	// Messages read from the end of one pause to the end of the next.
	MsgsBetweenMedian float64 `json:"msgs_between_median"`
	MsgsBetweenMean   float64 `json:"msgs_between_mean"`
	// Durations of the pauses, ns.
	MeanNs int64 `json:"mean_ns"`
	P50Ns  int64 `json:"p50_ns"`
	P90Ns  int64 `json:"p90_ns"`
	MaxNs  int64 `json:"max_ns"`
}

// Classes of the pauses of pauses.csv.
const (
	CalPauseGC           = "gc"           // the JVM's GC or VM threads ran for a meaningful share of it
	CalPauseStall        = "stall"        // they did not: the kernel, the scheduler, the load
	CalPauseUnclassified = "unclassified" // no evidence either way
)

// CalCoalescing is one step's coalescing statistics.
type CalCoalescing struct {
	Step         int     `json:"step"`
	Pattern      string  `json:"pattern"`
	RateAchieved float64 `json:"rate_achieved"`
	// From sweep.json (capture): packets and TCP payload bytes per message.
	PacketsPerMsgIn  float64 `json:"packets_per_msg_in"`
	PacketsPerMsgOut float64 `json:"packets_per_msg_out"`
	BytesPerMsgIn    float64 `json:"bytes_per_msg_in"`
	BytesPerMsgOut   float64 `json:"bytes_per_msg_out"`
	// From net.csv over the step's window: payload bytes per packet;
	// 0 when not recorded.
	BytesPerPacketIn  float64 `json:"bytes_per_packet_in"`
	BytesPerPacketOut float64 `json:"bytes_per_packet_out"`
	// From gso.csv (whole recording), per direction ("in": after GRO,
	// "out": GSO as handed to the device): mean TCP segments per skb and
	// the share of skbs carrying more than one.
	SegsPerSKB    map[string]float64 `json:"segs_per_skb,omitempty"`
	MultiSegShare map[string]float64 `json:"multi_seg_share,omitempty"`
}

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
	// (platform.json), option (given on the command line), gclog (a JVM
	// GC log given to calibrate), or default
	// (none measured; the value is assumed).
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

// CalPausesFile lists every pause a calibration found, beside
// calibration.json.
const CalPausesFile = "pauses.csv"

// CalPauseRow is one pause of pauses.csv: a stretch in which the broker
// read nothing while the bytes of the message read at its end waited in
// the socket.
type CalPauseRow struct {
	Step  int   `csv:"step"`
	Start int64 `csv:"start_ns"` // the later of the previous read and the waiting bytes' arrival
	End   int64 `csv:"end_ns"`   // the read that ended it
	Dur   int64 `csv:"duration_ns"`
	// MsgsSince is the messages read since the end of the step's previous
	// pause, this one's first included; empty for a step's first pause.
	MsgsSince *int64 `csv:"msgs_since_previous"`
	// GCOnCPU is the time within the pause during which at least one of
	// the JVM's GC or VM threads was on a CPU (gc_stints.csv); empty
	// without that evidence. Class is CalPauseGC, CalPauseStall or
	// CalPauseUnclassified.
	GCOnCPU *int64 `csv:"gc_oncpu_ns"`
	Class   string `csv:"class"`
}
