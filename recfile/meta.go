package recfile

import (
	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/probes/sockio"
)

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

	// Window is the length of the windows of the time series, in ns.
	WindowNs int64 `json:"window_ns"`
	// Sources: what each source beside the socket probe recorded, or why
	// it could not run.
	Sources map[string]SourceMeta `json:"sources"`

	Messages correlate.Counts `json:"messages"`
	Rows     int64            `json:"rows"`
	Files    []string         `json:"files"`
	// Warnings lists every known loss or gap in plain words; empty when the
	// recording is complete.
	Warnings []string `json:"warnings"`
}

// Host describes the machine.
type Host struct {
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
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
}

// Probe describes the socket-I/O probe that ran and its counters.
type Probe struct {
	Path      string       `json:"path"`
	Hooks     []string     `json:"hooks"`
	ScanLimit int          `json:"scan_limit_bytes"`
	RingSize  int          `json:"ring_buffer_bytes"`
	Stats     sockio.Stats `json:"counters"`
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
