package report

import (
	"encoding/json"
	"math"

	"github.com/brokertrace/brokertrace/analysis"
)

// Report is everything `brokertrace report` computed: the --json output.
// Times are ns, throughputs messages per second, CPU in CPUs' worth unless
// the name says percent.
type Report struct {
	// Out is the directory report.html, plots/ and figures/ were written to.
	Out  string `json:"out"`
	HTML string `json:"html"`
	// Window is the M of the windowed overheads and throughputs.
	Window int    `json:"window"`
	Runs   []*Run `json:"runs"`
	// Parametrised are the aggregates across runs against what varied
	// between them; empty for a single run.
	Parametrised []*ParamSet `json:"parametrised,omitempty"`
	// Files are the files written, relative to Out.
	Files []string `json:"files"`
}

// Run is one measurement: a recording, a load run, or both joined.
type Run struct {
	Label     string `json:"label"`
	RecordDir string `json:"record_dir,omitempty"`
	LoadDir   string `json:"load_dir,omitempty"`
	Host      string `json:"host,omitempty"`
	Target    string `json:"target,omitempty"` // the recorded process's command line
	// Params are the run's settings a parametrised comparison may vary:
	// size_bytes, rate_per_s (0: as fast as possible), burst_messages
	// (bursty pattern only), from load.json.
	Params map[string]float64 `json:"params,omitempty"`

	Join *Join `json:"join,omitempty"`
	// E2E is the load generator's view (e2e.csv: O_n = t_send_ns, I_n =
	// t_recv_ns) of every received non-warm-up message; Broker the
	// recording's (messages.csv first copies: O_n = t_in_ns, I_n =
	// t_out_ns) — of the joined messages when the run is joined, else of
	// every message recorded.
	E2E    *Series `json:"e2e,omitempty"`
	Broker *Series `json:"broker,omitempty"`
	// Path splits the end-to-end latency of the joined messages into its
	// three legs.
	Path *Path `json:"path,omitempty"`

	CtxSw     *CtxSw            `json:"context_switches,omitempty"`
	SockqWait *analysis.Summary `json:"sockq_wait_ns,omitempty"`
	CPU       *CPU              `json:"cpu,omitempty"`
	Threads   []Thread          `json:"threads,omitempty"`
	Packets   *Packets          `json:"packets,omitempty"`

	// Missing says which optional files or columns the recording lacks,
	// and why; those parts of the report are left out.
	Missing []string `json:"missing"`
	// Warnings are the recording's and load run's own (losses, gaps).
	Warnings []string `json:"warnings"`
	// Notes are the report's: what could not be computed, and why.
	Notes []string `json:"notes"`
	// Figures are the HTML ids of the run's figures.
	Figures []string `json:"figures"`

	figs []*figure
	// per-message data kept for the figures
	e2eSer, brokerSer analysis.Series
	joined            *analysis.Joined
	// cpu_per_msg.csv: the sample's n, C_n in percent, CPU ns per message
	cpuN, cpuPct, cpuPerMsg []float64
	rec                     *recordData
	ld                      *loadData
}

// Join says how a load run and a recording were matched.
type Join struct {
	Counts analysis.JoinCounts `json:"counts"`
	// SameHost is how one machine (one CLOCK_MONOTONIC) was established.
	SameHost string `json:"same_host"`
	// ReadBeforeSent counts joined messages the broker read before the
	// load generator sent them: impossible on one clock, so 0 unless the
	// clocks differ (then the report refuses to join).
	ReadBeforeSent int `json:"read_before_sent"`
}

// Series is one per-message series, analysed.
type Series struct {
	Name string `json:"name"` // "end-to-end" or "broker"
	// From says what O_n and I_n are.
	From     string `json:"from"`
	Messages int    `json:"messages"`
	// RatePerSec is (N−1) / (O_{N−1} − O_0): the overall sending rate.
	RatePerSec Float            `json:"rate_per_s"`
	Analysis   *analysis.Report `json:"analysis"`
	// Top are the messages with the highest latency, highest first.
	Top []TopMessage `json:"top"`
	// Tenths are the latency aggregates of each tenth of the run in
	// message order: where the peaks are (start, middle, end).
	Tenths []Tenth `json:"by_tenth"`
	lat    []int64
}

// TopMessage is one of the slowest messages. N is its number in the
// series (0 for the first sent), AtS when it was sent (O_n − O_0) in s.
// The pointers are nil when unknown.
type TopMessage struct {
	N               int    `json:"n"`
	ID              uint64 `json:"id"`
	AtS             Float  `json:"at_s"`
	LatencyNs       int64  `json:"latency_ns"`
	E2ELatencyNs    *int64 `json:"e2e_latency_ns,omitempty"`
	BrokerLatencyNs *int64 `json:"broker_latency_ns,omitempty"`
	CtxSw           *int64 `json:"ctxsw,omitempty"`
	OnCPUNs         *int64 `json:"oncpu_ns,omitempty"`
	SockqWaitNs     *int64 `json:"sockq_wait_ns,omitempty"`
}

// Tenth is messages [From, To) of a series.
type Tenth struct {
	From     int   `json:"from"`
	To       int   `json:"to"`
	MedianNs Float `json:"median_ns"`
	P99Ns    Float `json:"p99_ns"`
	MaxNs    Float `json:"max_ns"`
}

// Path is the end-to-end latency of the joined messages in legs.
type Path struct {
	Messages     int              `json:"messages"`
	E2ENs        analysis.Summary `json:"e2e_ns"`
	ToBrokerNs   analysis.Summary `json:"to_broker_ns"`   // t_send → t_in
	BrokerNs     analysis.Summary `json:"broker_ns"`      // t_in → t_out
	FromBrokerNs analysis.Summary `json:"from_broker_ns"` // t_out → t_recv
}

// CtxSw are the context switches per message, by both definitions of
// docs/formats.md, always labelled: (a) switches out of the target's
// threads, (b) every switch on the CPUs the target may run on.
type CtxSw struct {
	// PerMessageTarget: messages.csv ctxsw (a), switches while each
	// message was inside the broker, over the Broker series' messages.
	PerMessageTarget *analysis.Summary `json:"per_message_target,omitempty"`
	// From sched.csv: all switches over all messages that entered.
	Windows        int               `json:"windows,omitempty"`
	MessagesIn     int64             `json:"messages_in,omitempty"`
	SwitchesTarget int64             `json:"switches_target,omitempty"`
	SwitchesCPUs   int64             `json:"switches_cpus,omitempty"`
	PerMsgTarget   Float             `json:"per_msg_target"` // (a) switches_target / msgs_in
	PerMsgCPUs     Float             `json:"per_msg_cpus"`   // (b) switches_cpus / msgs_in
	WindowsPerMsgA *analysis.Summary `json:"windows_per_msg_target,omitempty"`
	WindowsPerMsgB *analysis.Summary `json:"windows_per_msg_cpus,omitempty"`
}

// CPU is the broker's CPU per message (cpu_per_msg.csv, the seed's C_n)
// and per window (cpu.csv).
type CPU struct {
	// Every is N: one sample every N-th message copy.
	Every int `json:"every,omitempty"`
	// UsagePct is C_n × 100 (analysis.CPUPerMessage): the share of one
	// CPU the broker used over each N messages.
	UsagePct *analysis.Summary `json:"usage_pct,omitempty"`
	// NsPerMsg is (U_n − U_{n−N}) / N: broker CPU time per message.
	NsPerMsg *analysis.Summary `json:"ns_per_msg,omitempty"`
	// From cpu.csv, per window, in CPUs' worth.
	Windows      int               `json:"windows,omitempty"`
	BrokerSource string            `json:"broker_source,omitempty"` // cgroup or schedstat
	BrokerUtil   *analysis.Summary `json:"broker_util,omitempty"`
	SystemUtil   *analysis.Summary `json:"system_util,omitempty"`
}

// Thread is one row of threads.csv.
type Thread struct {
	TID          int    `json:"tid"`
	Comm         string `json:"comm"`
	CPUNs        int64  `json:"cpu_ns"`
	CPUNsPerMsg  Float  `json:"cpu_ns_per_msg"`
	RunqWaitNs   Float  `json:"runq_wait_ns"`
	Switches     Float  `json:"switches"`
	MessagesRead Float  `json:"messages_read"`
}

// Packets sums packets.csv, net.csv and gso.csv per direction.
type Packets struct {
	In  PacketDir `json:"in"`
	Out PacketDir `json:"out"`
}

// PacketDir is one direction: in (towards the broker) or out.
type PacketDir struct {
	Packets        int64 `json:"packets"`
	PayloadPackets int64 `json:"payload_packets"` // with a TCP payload
	PayloadBytes   int64 `json:"payload_bytes"`
	MaxPayload     int64 `json:"max_payload"`
	MeanPayload    Float `json:"mean_payload"` // over payload packets
	// PktsPerMsg: net.csv packets over messages of the direction.
	PktsPerMsg Float `json:"pkts_per_msg"`
	// SegsPerSkb: gso.csv TCP segments per skb (GSO/GRO batching).
	SegsPerSkb Float `json:"segs_per_skb"`
}

// ParamSet is a parametrised aggregate: one row per run, sorted by the
// parameter, with analysis.DefaultColumns.
type ParamSet struct {
	Param  string     `json:"param"`  // size_bytes, rate_per_s, burst_messages or run
	Series string     `json:"series"` // e2e or broker
	Rows   []ParamRow `json:"rows"`
	Dat    string     `json:"dat"`
}

// ParamRow is one run of a ParamSet.
type ParamRow struct {
	Param  float64          `json:"param"`
	Label  string           `json:"label"`
	Values map[string]Float `json:"values"`
}

// Float is a float64 that is written as null in JSON when it is NaN or
// infinite (undefined: no message, no window).
type Float float64

func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(v)
}

func (f *Float) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = Float(math.NaN())
		return nil
	}
	var v float64
	err := json.Unmarshal(b, &v)
	*f = Float(v)
	return err
}
