package metrics

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NativeFactor is the growth factor of the native histograms' buckets:
// client_golang picks schema 3, buckets 2^(1/8) ≈ 1.0905 wide, so a
// quantile read from one is within 9.05 % of the true value.
const NativeFactor = 1.1

// NativeWidth is the ratio of a native bucket's upper to its lower bound
// at NativeFactor (schema 3).
var NativeWidth = math.Pow(2, 1.0/8)

// nativeMaxBuckets bounds each native histogram: 25 octaves at schema 3,
// 1 µs to 30 s for a time; past it client_golang halves the resolution.
const nativeMaxBuckets = 200

// histograms are the per-message histograms, by broker. Each is a native
// histogram with classic buckets beside it: a Prometheus that negotiates
// the protobuf format with native histograms enabled stores the native
// one, any other the classic buckets.
type histograms struct {
	latency, ctxsw, oncpu, sockq *prometheus.HistogramVec
}

// decades125 are classic bounds 1, 2, 5 per decade from 10^exp, n of
// them, each the float closest to its decimal (2e-05, not 1e-05·2).
func decades125(exp, n int) []float64 {
	b := make([]float64, 0, n)
	for e := exp; len(b) < n; e++ {
		for _, m := range []int{1, 2, 5} {
			if len(b) < n {
				v, _ := strconv.ParseFloat(fmt.Sprintf("%de%d", m, e), 64)
				b = append(b, v)
			}
		}
	}
	return b
}

func newHistogram(name, help string, buckets []float64) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:                            name,
		Help:                            help,
		Buckets:                         buckets,
		NativeHistogramBucketFactor:     NativeFactor,
		NativeHistogramMaxBucketNumber:  nativeMaxBuckets,
		NativeHistogramMinResetDuration: time.Hour,
	}, labelNames)
}

func newHistograms() histograms {
	// 1 µs … 10 s: from a broker forwarding in place to one queueing.
	times := decades125(-6, 22)
	return histograms{
		latency: newHistogram("brokertrace_broker_latency_seconds",
			"Time each message copy spent inside the broker, from the read that brought its marker in to the write that sent this copy (messages.csv latency_ns).", times),
		ctxsw: newHistogram("brokertrace_message_context_switches",
			"Context switches out of the broker's threads between a copy's t_in and t_out (messages.csv ctxsw).",
			[]float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}),
		oncpu: newHistogram("brokertrace_message_cpu_seconds",
			"On-CPU time of the broker's threads between a copy's t_in and t_out (messages.csv oncpu_ns).", times),
		sockq: newHistogram("brokertrace_socket_queue_wait_seconds",
			"Time a message's bytes waited in the broker's socket receive queue before its read (messages.csv sockq_wait_ns).", times),
	}
}

func (h histograms) all() []prometheus.Collector {
	return []prometheus.Collector{h.latency, h.ctxsw, h.oncpu, h.sockq}
}
