package recfile

import "strings"

// SweepFile describes a sweep: what it was asked, and per step where its
// recording is and what was measured there. It is written after every step,
// so an interrupted sweep can be resumed from it.
const SweepFile = "sweep.json"

// Sweep is sweep.json.
type Sweep struct {
	Tool      string       `json:"tool"`
	Version   string       `json:"version"`
	Host      Host         `json:"host"`
	Options   SweepOptions `json:"options"`
	StartWall string       `json:"start_wall"`
	EndWall   string       `json:"end_wall,omitempty"`
	// Steps holds every step planned, in the order run; a step not yet run
	// has Status "pending".
	Steps []SweepStep `json:"steps"`
	// SaturatedAt is the index in Steps of the first step (in the order
	// run) whose achieved rate fell behind the asked rate; absent when
	// none did.
	SaturatedAt *int `json:"saturated_at,omitempty"`
	// Knee is where the broker starts to fall behind, from the steps of
	// the first pattern: absent before a step is done.
	Knee *SweepKnee `json:"knee,omitempty"`
	// Recorder says how every step's `brokertrace record` was placed (its
	// --priority and --self-cpus) so that it keeps up with the load.
	Recorder string `json:"recorder,omitempty"`
	// Scheduler holds the kernel's time-slice settings while the sweep ran.
	Scheduler SchedSettings `json:"scheduler"`
	// Broker says how the broker lived through the sweep: "started once"
	// (run mode: one broker for every step, in a cgroup of its own, as the
	// paper's long-running broker; a JIT warms up once) or "attached".
	Broker string `json:"broker"`
	// BrokerCgroup is the cgroup the sweep made for the broker (run mode).
	BrokerCgroup string `json:"broker_cgroup,omitempty"`
	// Runs counts the sweep commands that wrote this file: more than one
	// when an interrupted sweep was resumed.
	Runs     int      `json:"runs"`
	Warnings []string `json:"warnings"`
	// Idle is the idle step (--idle): the broker recorded without load
	// after the ladder, Pattern "idle", its window the recording less a
	// quarter second at each end. Its BrokerUtil and WakeupsPerSec are the
	// background the model adds at every rate: timers and housekeeping.
	Idle *SweepStep `json:"idle,omitempty"`
}

// Phases of SweepStep.Phase.
const (
	SweepSearch = "search"
	SweepRefine = "refine"
	// SweepConfirm repeats a rate whose deciding step saturated with
	// neither the broker's nor the load's CPU full: a passing stall of
	// the host can make a step near the knee fall behind, and the search
	// would then stop short of it. The repeat decides the rate.
	SweepConfirm = "confirm"
)

// WarmUtil is BrokerUtil without the JIT compiler's CPU: a warmed-up
// broker's, which a model of the broker predicts.
func (s *SweepStep) WarmUtil() float64 { return s.BrokerUtil - s.JITUtil }

// SweepKnee is where a sweep's broker saturates: between the highest
// rate it kept up with and the lowest it fell behind at.
type SweepKnee struct {
	// Found: some step saturated and some step below it did not.
	Found bool `json:"found"`
	// Unsaturated is the step with the highest asked rate below Saturated
	// that kept up, and Rate its achieved rate: the knee as measured.
	Unsaturated *int    `json:"unsaturated_step,omitempty"`
	Rate        float64 `json:"rate"`
	// Saturated is the step with the lowest asked rate that fell behind.
	Saturated         *int    `json:"saturated_step,omitempty"`
	SaturatedAsked    float64 `json:"saturated_asked,omitempty"`
	SaturatedAchieved float64 `json:"saturated_achieved,omitempty"`
	// Note says in words what was found, or why no knee was.
	Note string `json:"note"`
}

// Lossy says whether the step's recording lost markers or events.
func (s *SweepStep) Lossy() bool { return s.MarkersLost > 0 || s.DroppedEvents > 0 }

// ArrivalLossesOnly says whether every loss of a lossy step is the
// socket-queue source's (Losses under "sources.sockq."), and sums them.
// That source gives the calibration only t_arrive_ns, to tell a pause from
// a gap in the load; the messages of a chunk it missed get the next
// chunk's time on their connection (or none, counted). So its losses cost
// the pause check of a few messages, not a measurement: calibrate uses
// such a step, with a warning. (The kernel's recursion
// guard skips a run of its program now and then at saturation: 1–13 runs
// a sweep on nats-server, ActiveMQ and RabbitMQ here.)
func (s *SweepStep) ArrivalLossesOnly() (uint64, bool) {
	var n uint64
	for path, k := range s.Losses {
		if !strings.HasPrefix(path, "sources.sockq.") {
			return 0, false
		}
		n += k
	}
	return n, n > 0 && n == s.DroppedEvents && s.MarkersLost == 0
}

// Bottlenecks of a saturated SweepStep.
const (
	BottleneckBroker  = "broker-cpu"
	BottleneckLoad    = "load-cpu"
	BottleneckNeither = "neither-cpu"
)

// SweepStatus values of SweepStep.Status.
const (
	SweepPending = "pending"
	SweepDone    = "done"
	SweepFailed  = "failed"
	SweepSkipped = "skipped"
)

// SweepOptions are what the sweep was asked to do.
type SweepOptions struct {
	URL      string `json:"url"`
	Protocol string `json:"protocol"` // nats, stomp, mqtt, amqp, redis, tcp
	// Target is how the broker was chosen: "run" (started by the sweep,
	// Command) or "pid N", "port N", "name COMM" (attached).
	Target     string    `json:"target"`
	Command    []string  `json:"command,omitempty"`
	BrokerCPUs string    `json:"broker_cpus,omitempty"`
	LoadCPUs   string    `json:"load_cpus,omitempty"`
	Rates      []float64 `json:"rates"`   // msg/s asked, in order
	Pattern    string    `json:"pattern"` // regular, bursty or both
	Burst      int       `json:"burst"`   // messages per burst (bursty)
	Size       int       `json:"size"`    // body bytes, marker included
	StepNs     int64     `json:"step_ns"` // how long each step sends
	WarmupNs   int64     `json:"warmup_ns"`
	CooldownNs int64     `json:"cooldown_ns"` // end of each step left out (shutdown)
	// Behind is the achieved/asked ratio below which a step is saturated.
	Behind float64 `json:"behind"`
	// Beyond: keep climbing after saturation.
	Beyond bool `json:"beyond"`
	// Search: no ladder was given; the sweep climbs from From, each rate
	// Factor times the one before, until a step saturates, then bisects
	// between the last unsaturated rate and the first saturated one, at
	// most Refine times (Rates is then empty).
	Search bool    `json:"search,omitempty"`
	From   float64 `json:"from,omitempty"`
	Factor float64 `json:"factor,omitempty"`
	Refine int     `json:"refine,omitempty"`
	// CPUQuota throttles a broker the sweep starts (run mode) to this
	// many CPUs' worth (cgroup CPU quota); 0: unthrottled.
	CPUQuota float64 `json:"cpu_quota,omitempty"`
	// RecordFlags are passed to every step's `brokertrace record` as given.
	RecordFlags []string `json:"record_flags,omitempty"`
	// IdleNs is how long the idle step records the broker without load,
	// after the ladder; 0: no idle step.
	IdleNs int64 `json:"idle_ns,omitempty"`
}

// SweepStep is one rate of one pattern.
type SweepStep struct {
	Index     int     `json:"index"`
	Dir       string  `json:"dir"` // relative to the sweep directory
	Pattern   string  `json:"pattern"`
	Burst     int     `json:"burst,omitempty"`
	RateAsked float64 `json:"rate_asked"`
	// Phase is why a knee search chose the step's rate: SweepSearch (the
	// climb), SweepRefine (between the last unsaturated and the first
	// saturated rate) or SweepConfirm (a rate again); empty when the
	// rates were given.
	Phase string `json:"phase,omitempty"`
	// Status: pending, done, failed, skipped (past saturation).
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// The measured window (warm-up and cool-down left out), CLOCK_MONOTONIC.
	WindowStartNs int64 `json:"window_start_ns,omitempty"`
	WindowEndNs   int64 `json:"window_end_ns,omitempty"`
	// Over the measured window:
	RateAchieved float64 `json:"rate_achieved"` // messages the consumer received per second
	Sent         int64   `json:"sent"`
	Received     int64   `json:"received"`
	Saturated    bool    `json:"saturated"`
	Messages     int64   `json:"messages"` // messages.csv first copies in the window
	// ArrivalCV is the coefficient of variation of the gaps between
	// those messages' arrivals on the broker's socket (t_arrive_ns):
	// 0 for one message every 1/rate, 3 for bursts of ten, 1 for a
	// Poisson stream. A load that fell behind its schedule and caught
	// up sent clumps, whatever its pattern. nil without the
	// socket-queue source.
	ArrivalCV *float64 `json:"arrival_cv,omitempty"`
	// BrokerUtil is the broker's CPU in CPUs' worth (BrokerUtilSource:
	// cgroup or schedstat), SystemUtil all CPUs' busy time
	// (SystemUtilSource: cpuidle or timer_list, exact, when every row has
	// it; else proc_stat, tick-sampled).
	BrokerUtil       float64 `json:"broker_util"`
	BrokerUtilSource string  `json:"broker_util_source"`
	// JITUtil is the part of BrokerUtil a JVM's JIT compiler threads took
	// (IsJITThread; thread_windows.csv): the warm-up of a JVM started
	// for the sweep, which a long-running broker has behind it.
	JITUtil          float64 `json:"jit_util,omitempty"`
	SystemUtil       float64 `json:"system_util"`
	SystemUtilSource string  `json:"system_util_source,omitempty"`
	// LoadCPUsBusy is the busy time of the load's CPUs (--load-cpus) in
	// CPUs' worth: cpu_cores.csv's exact column (cpuidle residency).
	LoadCPUsBusy float64 `json:"load_cpus_busy,omitempty"`
	// Bottleneck says, for a saturated step, whose CPU was full: the
	// broker's (BottleneckBroker: its CPUs or its quota), the load's
	// (BottleneckLoad: the load generator and the recorder could go no
	// faster, and the broker's own saturation lies higher), or neither
	// (BottleneckNeither: a lock, the network, a thread's own limit).
	Bottleneck string `json:"bottleneck,omitempty"`
	// Context switches per message entering the broker: out of the
	// broker's threads (a), and on the CPUs of its affinity (b).
	SwitchesPerMsgThreads float64 `json:"switches_per_msg_threads"`
	SwitchesPerMsgCPUs    float64 `json:"switches_per_msg_cpus"`
	// WakeupsPerSec are the voluntary switches of the broker's threads
	// per second (each a thread that blocked, woken once).
	WakeupsPerSec float64 `json:"wakeups_per_s,omitempty"`
	// LatencyNs: messages.csv latency_ns of first copies in the window.
	LatencyNs LatencyStats `json:"latency"`
	// Packets and TCP payload bytes per message, each direction (capture).
	PacketsPerMsgIn  float64 `json:"packets_per_msg_in"`
	PacketsPerMsgOut float64 `json:"packets_per_msg_out"`
	BytesPerMsgIn    float64 `json:"bytes_per_msg_in"`
	BytesPerMsgOut   float64 `json:"bytes_per_msg_out"`
	// Losses over the whole step, never left out: messages the load's
	// consumer never received (Missing), and what the recording lost.
	// Losses names every loss counter of the step's meta.json that is not
	// zero ("sockio.dropped_markers", "capture.drops", …); MarkersLost
	// sums the markers among them (in events the socket probe's ring had
	// no room for, or split and not kept), DroppedEvents the rest: events,
	// samples, packets and probe runs lost. A step with either is not a
	// complete measurement (Lossy).
	Missing       int               `json:"missing"`
	MarkersLost   uint64            `json:"markers_lost"`
	DroppedEvents uint64            `json:"dropped_events"`
	Losses        map[string]uint64 `json:"losses,omitempty"`
	// WallNs is how long the step took, recording start to stop.
	WallNs int64 `json:"wall_ns,omitempty"`
	// Absent names the summaries the step's files could not give (a
	// source switched off or unsupported); their fields are 0.
	Absent []string `json:"absent,omitempty"`
	// Warnings are the recording's (meta.json) and the load's, e.g.
	// messages held longer than record's --id-ttl, left out of Messages.
	Warnings []string `json:"warnings,omitempty"`
}

// SchedSettings are the kernel scheduler's settings that bound a thread's
// time slice, as the kernel reported them: the model's quantum when no
// platform experiment measured one.
type SchedSettings struct {
	// Settings by name, in ns, as the scheduler applies them (already
	// scaled by the number of CPUs): "base_slice_ns" (EEVDF, Linux 6.6+),
	// or "latency_ns", "min_granularity_ns", "wakeup_granularity_ns"
	// (CFS, older kernels).
	Settings map[string]int64 `json:"settings"`
	// Scaling is sysctl_sched_tunable_scaling: none, logarithmic, linear.
	Scaling string `json:"scaling,omitempty"`
	// Source names the file(s) they were read from; Error why none could be.
	Source string `json:"source,omitempty"`
	Error  string `json:"error,omitempty"`
	// Note says what was done to read them ("mounted debugfs at …").
	Note string `json:"note,omitempty"`
}
