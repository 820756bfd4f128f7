package recfile

import "time"

// The files of a load directory (brokertrace load --out): e2e.csv, one row
// per message sent, load.json, the run's summary, and, when the run
// subscribed on other nodes of a cluster (--sub-url), subs.csv, one row per
// message and subscriber.
const (
	E2EFile      = "e2e.csv"
	LoadJSONFile = "load.json"
	SubsFile     = "subs.csv"
)

// E2ERow is one message of e2e.csv. Times are CLOCK_MONOTONIC ns of the
// machine that ran the load, the clock of messages.csv when both ran on
// one machine.
type E2ERow struct {
	ID        uint64 `csv:"id"`
	TIntended int64  `csv:"t_intended_ns"` // when the open-loop schedule meant to send it
	TSend     int64  `csv:"t_send_ns"`     // right before the client's publish call
	TRecv     *int64 `csv:"t_recv_ns"`     // on entry to the consumer's handler; empty: never received
	Warmup    uint8  `csv:"warmup"`        // 1: sent in the warm-up, left out of summaries
}

// SubRow is one message as one subscriber saw it, in subs.csv: a run with
// several subscribers (LoadOptions.SubURLs) writes every message once per
// subscriber, in e2e.csv's order, subscribers in flag order within a
// message. Its send times are e2e.csv's row with the same id.
type SubRow struct {
	ID    uint64 `csv:"id"`
	Sub   int    `csv:"sub"`       // 1-based position of the subscriber in LoadOptions.SubURLs
	TRecv *int64 `csv:"t_recv_ns"` // on entry to that subscriber's handler; empty: never received
}

// LoadOptions are what a load run was asked to do: load.json's "options".
type LoadOptions struct {
	URL     string `json:"url"`
	Subject string `json:"subject"`
	// SubURLs, when given, are where the run subscribes instead of URL:
	// one consumer per URL, typically other nodes of URL's cluster, so
	// that messages are measured end to end across it. All must have URL's
	// scheme.
	SubURLs []string `json:"sub_urls,omitempty"`
	// Rate in messages per second; 0 sends as fast as possible (Count is
	// then required, since per-message slots are preallocated).
	Rate float64 `json:"rate"`
	// Count stops the run after this many messages; Duration stops it when
	// that much time has passed since the start. With both, the first
	// reached wins; at least one is required.
	Count    int           `json:"count"`
	Duration time.Duration `json:"duration_ns"`
	// Warmup marks messages intended within this time of the start; they
	// are sent, received and written like the others but left out of the
	// latency summary.
	Warmup time.Duration `json:"warmup_ns"`
	// Drain is how long to wait after the last send for outstanding
	// messages before they are counted missing.
	Drain time.Duration `json:"drain_ns"`
	// Size is the body size in bytes, marker included (minimum marker.Len).
	Size int `json:"size"`
	// Payload is what the bodies hold: "fixed" (the default: the marker,
	// then '.' filler), "json" (a JSON event with a timestamp, ids and
	// fields, new per message) or "random" (random bytes, new per
	// message). With json and random the marker is the body's last 20
	// bytes, so that a message ends where its marker does.
	Payload string `json:"payload,omitempty"`
	// Pattern is PatternRegular (default) or PatternBursty.
	Pattern string `json:"pattern"`
	// Burst is the number of messages per burst for PatternBursty.
	Burst int `json:"burst"`
	// IDBase is the first message id; 0 derives one from the wall clock
	// (microseconds << 12), so runs started at different times do not reuse
	// ids unless one sends more than 4096 messages per microsecond between
	// them.
	IDBase uint64 `json:"id_base"`
	// LateAfter is how far behind its intended time a send must be to count
	// as late; smaller delays are scheduler noise.
	LateAfter time.Duration `json:"late_after_ns"`
	// Out is the directory the CLI writes files to; Run ignores it (see
	// Result.WriteFiles).
	Out string `json:"out,omitempty"`
}

// LoadSummary is load.json: what a load run was asked to do, what it did,
// and its end-to-end latencies.
//
// With several subscribers (Options.SubURLs) the top-level counts of what
// was received (Received, Missing, MissingIDs, Duplicates, Unexpected,
// Unmarked, ClientDropped) and the e2e latencies are subscriber 1's, so
// readers of single-subscriber runs keep working; Subscribers has every
// subscriber's.
type LoadSummary struct {
	Options  LoadOptions `json:"options"`
	Driver   string      `json:"driver"`
	URL      string      `json:"url"`
	StartNs  int64       `json:"start_ns"`
	SendEnd  int64       `json:"send_end_ns"`
	EndNs    int64       `json:"end_ns"`
	FirstID  uint64      `json:"first_id"`
	LastID   uint64      `json:"last_id,omitempty"` // of the last message sent
	IDFormat string      `json:"id_format"`
	// NamedByOrder: payload "same" with no header for the marker (Redis,
	// MQTT 3.1.1): the messages carried none, each consumer named them by
	// their order of arrival.
	NamedByOrder bool `json:"named_by_order,omitempty"`

	Planned       int      `json:"planned"`
	Sent          int      `json:"sent"`
	Received      int      `json:"received"`
	Missing       int      `json:"missing"`
	MissingIDs    []uint64 `json:"missing_ids_first,omitempty"` // at most 100
	Duplicates    int      `json:"duplicates"`
	Unexpected    int      `json:"unexpected"`
	Unmarked      int      `json:"unmarked"`
	ClientDropped int      `json:"client_dropped"`
	Warmup        int      `json:"warmup_messages"`
	Interrupted   bool     `json:"interrupted"`
	Behind        bool     `json:"ended_behind_schedule"`
	Error         string   `json:"error,omitempty"`

	// AskedRate is Options.Rate (0: as fast as possible). AchievedRate is
	// the rate the sends actually kept: for a paced run, the asked rate
	// scaled by intended span / actual span of the sends; for an unpaced
	// one, messages per second between first and last send.
	AskedRate    float64 `json:"asked_rate"`
	AchievedRate float64 `json:"achieved_rate"`
	// ShortfallPct is how far the achieved rate fell below the asked one,
	// in percent (0 when it kept up or no rate was asked).
	ShortfallPct float64 `json:"shortfall_pct"`
	Unsent       int     `json:"unsent"` // Planned - Sent

	// Lateness is t_send - t_intended; a send later than LateAfter counts.
	LateAfterNs   int64        `json:"late_after_ns"`
	LateSends     int          `json:"late_sends"`
	MaxLatenessNs int64        `json:"max_lateness_ns"`
	Lateness      LatencyStats `json:"lateness"`

	// End-to-end latency of received non-warm-up messages: from the
	// intended send time (what a user of an open-loop system waits) and
	// from the actual send.
	LatencyFromIntended LatencyStats `json:"e2e_from_intended"`
	LatencyFromSend     LatencyStats `json:"e2e_from_send"`

	// Subscribers are the run's subscribers in Options.SubURLs order;
	// absent when the run subscribed on URL only.
	Subscribers []SubscriberSummary `json:"subscribers,omitempty"`
}

// SubscriberSummary is what one subscriber of a run received, counted as
// LoadSummary counts them.
type SubscriberSummary struct {
	URL                 string       `json:"url"` // password redacted
	Received            int          `json:"received"`
	Missing             int          `json:"missing"`
	Duplicates          int          `json:"duplicates"`
	Unexpected          int          `json:"unexpected"`
	Unmarked            int          `json:"unmarked"`
	ClientDropped       int          `json:"client_dropped"`
	LatencyFromIntended LatencyStats `json:"e2e_from_intended"`
	LatencyFromSend     LatencyStats `json:"e2e_from_send"`
}

// LatencyStats are percentiles of a set of ns durations, from an HdrHistogram with
// 3 significant digits; MinNs and MaxNs are exact.
type LatencyStats struct {
	Count  int64   `json:"count"`
	MinNs  int64   `json:"min_ns"`
	P50Ns  int64   `json:"p50_ns"`
	P90Ns  int64   `json:"p90_ns"`
	P99Ns  int64   `json:"p99_ns"`
	P999Ns int64   `json:"p999_ns"`
	MaxNs  int64   `json:"max_ns"`
	MeanNs float64 `json:"mean_ns"`
	// Clamped counts values above the histogram's range (1 hour), recorded
	// as that maximum.
	Clamped int64 `json:"clamped,omitempty"`
}
