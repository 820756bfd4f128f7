package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/brokertrace/brokertrace/capture"
)

// payloadDesc describes the packet payload-size histogram.
var payloadDesc = prometheus.NewDesc("brokertrace_packet_payload_bytes",
	"TCP payload bytes of the broker's segments, in (to the broker) and out, as the capture sees them: GRO-merged skbs on receive and GSO skbs on send count once, with their size, so sizes above the MSS show coalescing (packets.csv, --capture).",
	append(slices.Clone(labelNames), "direction"), nil)

// classicPayloadClasses: the classic buckets are the size classes up to
// 128 KiB (le 0, 1, 2, 4 … 131072); larger payloads are in +Inf only.
const classicPayloadClasses = 19

// payloadHistogram is direction dir's payload sizes from the capture
// source's cumulative size classes (capture.LiveSizeKey): exact both as a
// native histogram of schema 0, whose bucket i is (2^(i-1), 2^i] and so
// class i+1, with empty segments in the zero bucket, and as classic
// buckets at the classes' bounds. ok is false without the capture source.
func payloadHistogram(st *state, lv []string, dir string) (prometheus.Metric, bool) {
	// The classes are read after the packet counter: their sum is the
	// count.
	if _, ok := st.source("capture", capture.LivePkts+dir); !ok {
		return nil, false
	}
	sum, _ := st.source("capture", capture.LiveBytes+dir)
	var counts [capture.SizeClasses]uint64
	var n uint64
	for k := range counts {
		c, _ := st.source("capture", capture.LiveSizeKey(dir, k))
		counts[k] = uint64(c)
		n += counts[k]
	}
	return &payloadMetric{labels: prometheus.MakeLabelPairs(payloadDesc, append(slices.Clone(lv), dir)), counts: counts, n: n, sum: sum}, true
}

// payloadMetric is a histogram whose classic and native buckets are set
// from counts, which client_golang's const histograms do not offer
// together.
type payloadMetric struct {
	labels []*dto.LabelPair
	counts [capture.SizeClasses]uint64
	n      uint64
	sum    float64
}

// Desc implements prometheus.Metric.
func (m *payloadMetric) Desc() *prometheus.Desc { return payloadDesc }

// Write implements prometheus.Metric.
func (m *payloadMetric) Write(out *dto.Metric) error {
	h := &dto.Histogram{
		SampleCount:   proto.Uint64(m.n),
		SampleSum:     proto.Float64(m.sum),
		Schema:        proto.Int32(0),
		ZeroThreshold: proto.Float64(0),
		ZeroCount:     proto.Uint64(m.counts[0]),
	}
	var cum uint64
	for k := range classicPayloadClasses {
		cum += m.counts[k]
		h.Bucket = append(h.Bucket, &dto.Bucket{CumulativeCount: proto.Uint64(cum), UpperBound: proto.Float64(float64(capture.SizeClassMax(k)))})
	}
	// One span from the first to the last non-empty class, counts as
	// deltas from the previous bucket's.
	first := slices.IndexFunc(m.counts[1:], func(c uint64) bool { return c > 0 })
	if first >= 0 {
		last := len(m.counts) - 2
		for m.counts[last+1] == 0 {
			last--
		}
		h.PositiveSpan = []*dto.BucketSpan{{Offset: proto.Int32(int32(first)), Length: proto.Uint32(uint32(last - first + 1))}}
		prev := int64(0)
		for _, c := range m.counts[first+1 : last+2] {
			h.PositiveDelta = append(h.PositiveDelta, int64(c)-prev)
			prev = int64(c)
		}
	}
	out.Label, out.Histogram = m.labels, h
	return nil
}
