package recfile

import "math"

// Meta is meta.json: everything needed to interpret and trust a recording.
type Meta struct {
	Tool    string `json:"tool"`
	Version string `json:"version"`
	Host    Host   `json:"host"`
	Target  Target `json:"target"`
	Options any    `json:"options"`
	Probe   Probe  `json:"probe"`

	// CLOCK_MONOTONIC ns of the moment every probe was live, and of the end.
	StartNs int64 `json:"start_monotonic_ns"`
	EndNs   int64 `json:"end_monotonic_ns"`
	// Wall-clock times, for humans; never subtract them from probe times.
	StartWall string `json:"start_wall"`
	EndWall   string `json:"end_wall"`
	// Why the recording ended: "duration", "signal", "target-exited", "error".
	EndReason string `json:"end_reason"`
	// Clock maps the packet capture's timestamps (CLOCK_REALTIME) to the
	// recording's CLOCK_MONOTONIC; nil in recordings made before it existed.
	Clock *Clock `json:"clock,omitempty"`

	// Window is the length of the windows of the time series, in ns.
	WindowNs int64 `json:"window_ns"`
	// Sources: what each source beside the socket probe recorded, or why
	// it could not run.
	Sources map[string]SourceMeta `json:"sources"`

	Messages MessageCounts `json:"messages"`
	Rows     int64         `json:"rows"`
	Files    []string      `json:"files"`
	// Warnings lists every known loss or gap in plain words; empty when the
	// recording is complete.
	Warnings []string `json:"warnings"`

	// Privileges are the capabilities brokertrace held once attached
	// (see Privileges).
	Privileges Privileges `json:"privileges"`

	// Boost says how often brokertrace's own threads were lifted from
	// their --priority while a ring buffer filled; nil when they never
	// could be (--priority normal, --boost=false).
	Boost *Boost `json:"boost,omitempty"`

	// Discard is true when the recording was made with --discard: every
	// probe and source ran and no file was written (only the summary
	// holds this, e.g. record --json).
	Discard bool `json:"discard,omitempty"`
}

// Clock is CLOCK_REALTIME − CLOCK_MONOTONIC of the host, measured when
// the recording started and when it ended. The kernel stamps captured
// packets with the realtime clock; subtracting this mapping puts them on
// the monotonic clock of every other time in the recording. Frequency
// corrections (NTP's slewing) move both clocks alike, so the two readings
// differ only when the wall clock was stepped during the recording.
type Clock struct {
	StartNs int64 `json:"realtime_minus_monotonic_ns_start"`
	EndNs   int64 `json:"realtime_minus_monotonic_ns_end"`
	// UncertaintyNs bounds the error of either reading: half the tightest
	// monotonic/realtime/monotonic bracket of its reads.
	UncertaintyNs int64 `json:"uncertainty_ns"`
}

// ClockStepNs is the change of Clock between start and end beyond which the
// wall clock is taken to have been stepped during the recording.
const ClockStepNs = 5_000

// Stepped reports whether the wall clock was stepped during the recording:
// its two readings differ by more than ClockStepNs plus their uncertainty.
func (c *Clock) Stepped() bool {
	d := c.EndNs - c.StartNs
	return max(d, -d) > ClockStepNs+2*c.UncertaintyNs
}

// RealtimeToMonotonic maps a realtime timestamp (a captured packet's) to
// the recording's monotonic clock. A stepped clock is interpolated between
// the readings, over the recording's monotonic span [startNs, endNs]; the
// times near the unknown moment of the step are off by up to the step.
func (c *Clock) RealtimeToMonotonic(realNs, startNs, endNs int64) int64 {
	step, span := c.EndNs-c.StartNs, endNs-startNs
	if step == 0 || span <= 0 {
		return realNs - c.StartNs
	}
	// mono − start = (real − R(mono) − start), R linear in mono over the span.
	x := float64(realNs-c.StartNs-startNs) / (1 + float64(step)/float64(span))
	switch {
	case x <= 0:
		return realNs - c.StartNs
	case x >= float64(span):
		return realNs - c.EndNs
	}
	return startNs + int64(math.Round(x))
}

// Host describes the machine.
type Host struct {
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
	// BootID is the kernel's boot id: recordings with the same one share
	// CLOCK_MONOTONIC, whatever their hostname (a container's may differ).
	BootID string `json:"boot_id,omitempty"`
}

// Target describes the traced process.
type Target struct {
	PID     int      `json:"pid"`
	Comm    string   `json:"comm"`
	Exe     string   `json:"exe"`
	Cmdline []string `json:"cmdline"`
	// How it was chosen: "pid", "port" or "name", and the value given.
	SelectedBy string `json:"selected_by"`
	Selector   string `json:"selector"`
	// The container it runs in: the id in its cgroup path, and the name
	// and runtime (podman, docker) where the runtime's files say.
	Container     string `json:"container,omitempty"`
	ContainerName string `json:"container_name,omitempty"`
	Runtime       string `json:"container_runtime,omitempty"`
}

// ProbePath is where an eBPF probe runs and why, in every probe's part of
// meta.json: a probe that fell back to another path says why the paths
// before it failed, so that no fallback is silent.
type ProbePath struct {
	Path  string   `json:"path"`  // the hook path the probe runs on
	Hooks []string `json:"hooks"` // its kernel hooks
	// Reason: "first choice", "asked for", or "fallback: " and why each
	// path before it failed (the kernel's words, the verifier's included).
	Reason string `json:"path_reason"`
	// Notes say what was done to the host for the probe ("mounted tracefs
	// at /sys/kernel/tracing ...").
	Notes []string `json:"notes,omitempty"`
}

// FirstChoice is ProbePath.Reason of a probe on the path it prefers.
const FirstChoice = "first choice"

// Probe describes the socket-I/O probe that ran and its counters.
type Probe struct {
	ProbePath
	ScanLimit int `json:"scan_limit_bytes"` // 0: every byte of every call
	// Walk is how the probe walks a call's bytes: "bpf_loop" (every byte)
	// or "bounded" (kernels before 5.17: at most 1280 steps per call);
	// WalkReason says why.
	Walk       string         `json:"scan_walk"`
	WalkReason string         `json:"scan_walk_reason"`
	RingSize   int            `json:"ring_buffer_bytes"`
	Stats      SocketCounters `json:"counters"`
	// Match is what messages were matched by: "marker" (ids in the
	// bodies) or "frame" (the protocol's frames, keyed by the payload's
	// fingerprint and the subject's; messages.csv's id is that key).
	// FramePorts are the ports parsed and their protocols.
	Match      string            `json:"match"`
	FramePorts map[string]string `json:"frame_ports,omitempty"`
}

// SourceMeta is a source's entry in meta.json.
type SourceMeta struct {
	// Status is "ok", "unavailable" (it could not run on this host; Error
	// says why) or "failed".
	Status string   `json:"status"`
	Error  string   `json:"error,omitempty"`
	Files  []string `json:"files,omitempty"`
	Meta   any      `json:"meta,omitempty"`
}

// MessageCounts are what the matcher of reads and writes saw; nothing it
// could not match is dropped without being counted here.
type MessageCounts struct {
	MarkersIn    uint64 `json:"markers_in"`     // markers read by the broker
	MarkersOut   uint64 `json:"markers_out"`    // markers written by the broker
	Messages     uint64 `json:"messages"`       // distinct ids read
	Copies       uint64 `json:"copies_out"`     // rows: markers written whose id was read before
	DuplicateIn  uint64 `json:"duplicate_in"`   // an id read again (only the first read counts; --match frame: queued, see Ambiguous)
	OutWithoutIn uint64 `json:"out_without_in"` // an id written that was never read
	InWithoutOut uint64 `json:"in_without_out"` // ids read and never written (final after Finish)
	// Expired: ids read that had no copy written within --id-ttl and none
	// within the grace after it, so the matcher dropped them.
	Expired uint64 `json:"expired"`
	// LateOut: copies written after their id expired (more than
	// --id-ttl inside the broker): no row.
	LateOut uint64 `json:"late_out"`
	// Ambiguous (--match frame): copies matched while their key (payload
	// and subject) had more than one read pending for their connection —
	// identical payloads in flight together; each went to the oldest
	// (first in, first out per key and consumer).
	Ambiguous uint64 `json:"ambiguous"`
}

// SocketCounters are the socket-I/O probe's counters, summed over CPUs;
// [2] arrays are [in, out]. Counters every probe has are named alike in
// every section of meta.json: events, dropped, missed (see package probes).
type SocketCounters struct {
	Calls          [2]uint64 `json:"calls"`           // traced TCP socket calls
	Bytes          [2]uint64 `json:"bytes"`           // bytes they moved
	Scanned        [2]uint64 `json:"scanned_bytes"`   // bytes scanned for markers
	Unscanned      [2]uint64 `json:"unscanned_bytes"` // beyond --scan-limit or the bounded walk's steps
	FaultBytes     [2]uint64 `json:"faulted_bytes"`   // user memory that could not be read
	OtherCalls     [2]uint64 `json:"other_calls"`     // calls that cannot be scanned (sendfile, io_uring…)
	OtherBytes     [2]uint64 `json:"other_bytes"`     // bytes those calls moved
	Markers        [2]uint64 `json:"markers"`         // markers found
	Peeks          uint64    `json:"peeks"`           // MSG_PEEK/TRUNC/ERRQUEUE reads, not scanned
	Events         uint64    `json:"events"`          // events written to the ring buffer
	DroppedEvents  uint64    `json:"dropped"`         // events lost because the ring buffer was full
	DroppedMarkers uint64    `json:"dropped_markers"` // markers in those events
	CarryLost      uint64    `json:"carry_lost"`      // split markers' first bytes not kept: no memory
	Missed         uint64    `json:"missed"`          // program runs the kernel skipped (recursion on a CPU)
	// MissedMarkersEst estimates the markers in the bytes not scanned
	// (unscanned and faulted), summed over SizeClasses.
	MissedMarkersEst [2]float64 `json:"markers_missed_est"`
	// SizeClasses break the scan down by the size of the call; only classes
	// with calls are listed, in and out, smallest first.
	SizeClasses []SizeClass `json:"size_classes,omitempty"`
	// Frame is what the protocol parser counted with --match frame (Markers
	// then counts message records).
	Frame *FrameCounters `json:"frame,omitempty"`
}

// FrameCounters are the kernel protocol parser's counters ([in, out]): the
// frames it recognised and every byte it could not parse, with why.
type FrameCounters struct {
	Frames    [2]uint64 `json:"frames"`          // complete frames of any kind
	Bad       [2]uint64 `json:"bad"`             // invalid or oversized headers, wrong trailers
	Resyncs   [2]uint64 `json:"resyncs"`         // returns to a frame boundary after a bad frame or a gap
	Skipped   [2]uint64 `json:"skipped_bytes"`   // discarded while out of sync
	Encrypted [2]uint64 `json:"encrypted_bytes"` // of TLS connections: not parsed
	Unparsed  [2]uint64 `json:"unparsed_bytes"`  // of sockets on ports given no protocol
	Held      [2]uint64 `json:"held"`            // records whose trailer came in a later call
	Joined    uint64    `json:"joined_sockets"`  // met mid-stream: parsed from a frame boundary on
	TLS       uint64    `json:"tls_sockets"`     // found encrypted (a TLS record header first)
	Lost      uint64    `json:"lost_calls"`      // not parsed: no room for the socket's parser state
	// Interleaved are AMQP messages whose content was abandoned: another
	// content method came on the connection before their body was complete
	// (contents of two channels interleaved), so they were not matched.
	Interleaved [2]uint64 `json:"interleaved,omitempty"`
}

// SizeClass is the socket probe's scan of the calls of one direction whose
// size is in [MinBytes, 2·MinBytes).
type SizeClass struct {
	Dir       string `json:"dir"` // "in" or "out"
	MinBytes  uint64 `json:"min_bytes"`
	Calls     uint64 `json:"calls"`
	Scanned   uint64 `json:"scanned_bytes"`
	Unscanned uint64 `json:"unscanned_bytes"` // not scanned: scan limit, step budget or fault
	Markers   uint64 `json:"markers"`         // found in the scanned bytes
	// MissedMarkersEst is Unscanned × the markers per scanned byte of this
	// class, or of the direction where this class had none scanned.
	MissedMarkersEst float64 `json:"markers_missed_est"`
}

// Boost is what the watcher that lifts brokertrace's threads did (see
// process.Boost).
type Boost struct {
	// Priority is the threads' priority between lifts (--priority).
	Priority string `json:"priority"`
	// High and Low are the fills of the fullest ring buffer that lift the
	// threads and put them back; PeriodNs is how often the fill was read.
	High     float64 `json:"high"`
	Low      float64 `json:"low"`
	PeriodNs int64   `json:"period_ns"`
	// Lifts counts the lifts, LiftedNs is how long the threads ran lifted.
	Lifts    int   `json:"lifts"`
	LiftedNs int64 `json:"lifted_ns"`
	// MaxFill is the highest fill seen.
	MaxFill float64 `json:"max_fill"`
	// Error, if set, is why the watcher stopped lifting.
	Error string `json:"error,omitempty"`
}
