package recfile

// Privileges is meta.json's "privileges": the capabilities brokertrace
// held while it recorded. Once every probe was attached and every file
// it needs was open, a recording drops every capability it no longer
// uses and sets no_new_privs; these are the sets the kernel then
// reported, the same on every thread.
type Privileges struct {
	// Effective, Permitted and Bounding list capabilities by name
	// ("CAP_BPF"), lowest number first.
	Effective  []string `json:"effective"`
	Permitted  []string `json:"permitted"`
	Bounding   []string `json:"bounding"`
	NoNewPrivs bool     `json:"no_new_privs"`
	// DroppedNs is CLOCK_MONOTONIC ns when they were dropped; 0 when they
	// were not, and NotDropped says why.
	DroppedNs  int64  `json:"dropped_ns"`
	NotDropped string `json:"not_dropped,omitempty"`
	// Kept says, for each capability kept, why the recording needs it.
	Kept map[string]string `json:"kept"`
}
