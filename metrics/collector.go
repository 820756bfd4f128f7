package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// family is one metric read from an Exporter's state at each scrape. Its
// series are one per broker, or, with a label, one per broker and value
// of the label.
type family struct {
	name, help string
	typ        prometheus.ValueType
	label      string   // "" for none
	values     []string // the label's values
	// value is the series for the label's i-th value (0 without a
	// label); ok false leaves it out of the scrape.
	value func(st *state, i int) (v float64, ok bool)
	desc  *prometheus.Desc
}

var dirs = []string{"in", "out"}

// known wraps a value that is always there.
func known(f func(st *state, i int) float64) func(*state, int) (float64, bool) {
	return func(st *state, i int) (float64, bool) { return f(st, i), true }
}

// fromSource is a source's value key, scaled; with a label, key is
// completed by the label's value ("pkts_per_msg_" + "in").
func fromSource(name, key string, scale float64, labelled bool) func(*state, int) (float64, bool) {
	return func(st *state, i int) (float64, bool) {
		k := key
		if labelled {
			k += dirs[i]
		}
		v, ok := st.source(name, k)
		return v * scale, ok
	}
}

// families are the counters and gauges; docs/metrics.md lists them.
var families = []*family{
	{name: "brokertrace_messages_in_total", typ: prometheus.CounterValue,
		help:  "Marked messages the broker read: distinct ids (meta.json messages.messages).",
		value: known(func(st *state, _ int) float64 { return float64(st.counts.Messages) })},
	{name: "brokertrace_messages_out_total", typ: prometheus.CounterValue,
		help:  "Message copies the broker wrote whose id it had read: the rows of messages.csv (messages.copies_out).",
		value: known(func(st *state, _ int) float64 { return float64(st.counts.Copies) })},
	{name: "brokertrace_markers_total", typ: prometheus.CounterValue, label: "direction", values: dirs,
		help: "Markers found in the broker's socket reads (in) and writes (out), repeats included (messages.markers_in, markers_out).",
		value: known(func(st *state, i int) float64 {
			return float64([]uint64{st.counts.MarkersIn, st.counts.MarkersOut}[i])
		})},
	{name: "brokertrace_markers_duplicate_total", typ: prometheus.CounterValue,
		help:  "Markers read again after their id was read; only the first read counts (messages.duplicate_in).",
		value: known(func(st *state, _ int) float64 { return float64(st.counts.DuplicateIn) })},
	{name: "brokertrace_copies_ambiguous_total", typ: prometheus.CounterValue,
		help:  "With --match frame: copies matched while another message with the same payload and subject was pending for their connection (first in, first out assumed; messages.ambiguous).",
		value: known(func(st *state, _ int) float64 { return float64(st.counts.Ambiguous) })},
	{name: "brokertrace_markers_unmatched_total", typ: prometheus.CounterValue,
		help:  "Markers written whose id was never read: sent before the recording began, or lost (messages.out_without_in).",
		value: known(func(st *state, _ int) float64 { return float64(st.counts.OutWithoutIn) })},
	{name: "brokertrace_ids_expired_total", typ: prometheus.CounterValue,
		help:  "Ids read that had no copy written within --id-ttl and were forgotten (messages.expired).",
		value: known(func(st *state, _ int) float64 { return float64(st.counts.Expired) })},
	{name: "brokertrace_copies_late_total", typ: prometheus.CounterValue,
		help:  "Copies written after their id expired: no row for them (messages.late_out).",
		value: known(func(st *state, _ int) float64 { return float64(st.counts.LateOut) })},
	{name: "brokertrace_socket_calls_total", typ: prometheus.CounterValue, label: "direction", values: dirs,
		help:  "The broker's traced TCP socket calls, reads (in) and writes (out) (probe.stats.calls).",
		value: known(func(st *state, i int) float64 { return float64(st.socket.Calls[i]) })},
	{name: "brokertrace_socket_bytes_total", typ: prometheus.CounterValue, label: "direction", values: dirs,
		help:  "Bytes the broker's traced socket calls moved (probe.stats.bytes).",
		value: known(func(st *state, i int) float64 { return float64(st.socket.Bytes[i]) })},
	{name: "brokertrace_unscanned_bytes_total", typ: prometheus.CounterValue, label: "direction", values: dirs,
		help:  "Bytes not scanned for markers: beyond --scan-limit or the bounded walk's steps (probe.stats.unscanned_bytes).",
		value: known(func(st *state, i int) float64 { return float64(st.socket.Unscanned[i]) })},
	{name: "brokertrace_faulted_bytes_total", typ: prometheus.CounterValue, label: "direction", values: dirs,
		help:  "Bytes that could not be read from the broker's memory (probe.stats.faulted_bytes).",
		value: known(func(st *state, i int) float64 { return float64(st.socket.FaultBytes[i]) })},
	{name: "brokertrace_unscannable_calls_total", typ: prometheus.CounterValue, label: "direction", values: dirs,
		help:  "Calls the probe cannot scan: sendfile, splice, io_uring (probe.stats.other_calls).",
		value: known(func(st *state, i int) float64 { return float64(st.socket.OtherCalls[i]) })},
	{name: "brokertrace_missed_markers_estimate", typ: prometheus.GaugeValue, label: "direction", values: dirs,
		help:  "Estimated markers in the bytes not scanned, from the markers per scanned byte of calls of their size (probe.stats.markers_missed_est).",
		value: known(func(st *state, i int) float64 { return st.socket.MissedMarkersEst[i] })},
	{name: "brokertrace_dropped_events_total", typ: prometheus.CounterValue,
		help:  "Socket events lost because the ring buffer was full (probe.stats.dropped).",
		value: known(func(st *state, _ int) float64 { return float64(st.socket.DroppedEvents) })},
	{name: "brokertrace_dropped_markers_total", typ: prometheus.CounterValue,
		help:  "Markers in the socket events lost (probe.stats.dropped_markers).",
		value: known(func(st *state, _ int) float64 { return float64(st.socket.DroppedMarkers) })},
	{name: "brokertrace_probe_missed_total", typ: prometheus.CounterValue,
		help:  "Runs of the socket probe the kernel skipped: recursion on a CPU (probe.stats.missed).",
		value: known(func(st *state, _ int) float64 { return float64(st.socket.Missed) })},
	{name: "brokertrace_markers_carry_lost_total", typ: prometheus.CounterValue,
		help:  "Markers split across two calls that were lost: no memory to keep their first bytes (probe.stats.carry_lost).",
		value: known(func(st *state, _ int) float64 { return float64(st.socket.CarryLost) })},
	{name: "brokertrace_sched_dropped_events_total", typ: prometheus.CounterValue,
		help:  "Context-switch events lost because the scheduler probe's ring buffer was full (sched source, --sched).",
		value: fromSource("sched", "switch_events_dropped", 1, false)},
	{name: "brokertrace_capture_dropped_packets_total", typ: prometheus.CounterValue,
		help:  "Packets the kernel dropped before the capture read them (capture source, --capture).",
		value: fromSource("capture", "capture_drops", 1, false)},
	{name: "brokertrace_message_values_missing_total", typ: prometheus.CounterValue, label: "column",
		values: []string{perMessage[0].column, perMessage[1].column, perMessage[2].column},
		help:   "Rows of messages.csv whose field was empty: a value its source could not know for that message (not observed in the histogram).",
		value:  known(func(st *state, i int) float64 { return float64(st.missing[i]) })},
	{name: "brokertrace_broker_cpu_ratio", typ: prometheus.GaugeValue,
		help: "The broker's CPU time over the last window's wall time, in CPUs (1 = one CPU busy): from its cgroup, else its threads' schedstat (cpu.csv broker_cgroup_util, broker_proc_util).",
		value: func(st *state, _ int) (float64, bool) {
			if v, ok := st.source("cpu", "broker_cgroup_util"); ok {
				return v, true
			}
			return st.source("cpu", "broker_proc_util")
		}},
	{name: "brokertrace_system_cpu_ratio", typ: prometheus.GaugeValue,
		help:  "The whole host's busy CPU time over the last window's wall time, in CPUs, irq and softirq included (cpu.csv system_util).",
		value: fromSource("cpu", "system_util", 1, false)},
	{name: "brokertrace_cpu_seconds_per_message", typ: prometheus.GaugeValue,
		help:  "The broker's CPU time per message read in the last window (cpu.csv cpu_ns_per_msg).",
		value: fromSource("cpu", "cpu_ns_per_msg", 1e-9, false)},
	{name: "brokertrace_context_switches_per_message", typ: prometheus.GaugeValue,
		help:  "Context switches out of the broker's threads per message read in the last window (sched.csv switches_per_msg_target).",
		value: fromSource("sched", "switches_per_msg_target", 1, false)},
	{name: "brokertrace_cpu_context_switches_per_message", typ: prometheus.GaugeValue,
		help:  "Every context switch on the broker's CPUs per message read in the last window, as ICPE'14 Fig. 4 counts them (sched.csv switches_per_msg_cpus).",
		value: fromSource("sched", "switches_per_msg_cpus", 1, false)},
	{name: "brokertrace_packets_per_message", typ: prometheus.GaugeValue, label: "direction", values: dirs,
		help:  "TCP segments per message in the last window, GRO-merged skbs counting once (net.csv pkts_per_msg_in, pkts_per_msg_out).",
		value: fromSource("capture", "pkts_per_msg_", 1, true)},
	{name: "brokertrace_recording_finished", typ: prometheus.GaugeValue,
		help: "1 once the recording has ended and its counters are final (meta.json written), else 0.",
		value: known(func(st *state, _ int) float64 {
			if st.finished {
				return 1
			}
			return 0
		})},
}

func init() {
	for _, f := range families {
		names := labelNames
		if f.label != "" {
			names = append(slices.Clone(labelNames), f.label)
		}
		f.desc = prometheus.NewDesc(f.name, f.help, names, nil)
	}
}

// collector reads every Exporter of a Server at each scrape.
type collector Server

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range families {
		ch <- f.desc
	}
	ch <- payloadDesc
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	exporters := slices.Clone(c.exporters)
	c.mu.Unlock()
	for _, e := range exporters {
		st := e.state()
		for _, f := range families {
			n := max(len(f.values), 1)
			for i := range n {
				v, ok := f.value(&st, i)
				if !ok {
					continue
				}
				lv := e.lv
				if f.label != "" {
					lv = append(slices.Clone(e.lv), f.values[i])
				}
				ch <- prometheus.MustNewConstMetric(f.desc, f.typ, v, lv...)
			}
		}
		for _, dir := range dirs {
			if m, ok := payloadHistogram(&st, e.lv, dir); ok {
				ch <- m
			}
		}
	}
}
