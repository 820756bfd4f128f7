package capture

import (
	"math/bits"
	"strconv"
	"sync/atomic"

	"github.com/brokertrace/brokertrace/recfile"
)

// SizeClasses is the number of payload-size classes the capture keeps for
// live views: class 0 holds the segments without payload, class k ≥ 1 the
// payloads in (2^(k-2), 2^(k-1)] bytes (1, 2, 3–4, 5–8, …, the last one
// also anything larger). The bounds are powers of two so that a Prometheus
// native histogram of schema 0 and a classic one with power-of-two bounds
// hold the classes exactly; packets.csv keeps the exact sizes.
const SizeClasses = 33

// sizeClasses counts one direction's segments by class. The counters are
// atomic, so that a live view reads them while the tap's reader goroutine
// counts; that goroutine is their only writer, so a load and a store do,
// without the locked add's cost on the capture path.
type sizeClasses [SizeClasses]atomic.Uint64

func (c *sizeClasses) add(payload int) {
	k := &c[SizeClass(payload)]
	k.Store(k.Load() + 1)
}

// SizeClass is the class of a payload of n bytes.
func SizeClass(n int) int {
	if n <= 0 {
		return 0
	}
	return min(bits.Len(uint(n-1))+1, SizeClasses-1)
}

// SizeClassMax is the largest payload of class k: 0, 1, 2, 4, 8…
func SizeClassMax(k int) uint64 {
	if k == 0 {
		return 0
	}
	return 1 << (k - 1)
}

// Keys of LiveValues besides net.csv's columns; all are cumulative from
// the start of the capture.
const (
	LiveDrops = "capture_drops" // segments the kernel dropped before the capture read them
	// LivePkts and LiveBytes are followed by the direction, "in" or "out".
	LivePkts  = "pkts_total_"
	LiveBytes = "bytes_total_"
)

// LiveSizeKey is the LiveValues key of the segments of direction dir ("in"
// or "out") in size class k: "pkts_in_payload_le_1024". Classes without a
// segment are left out of LiveValues.
func LiveSizeKey(dir string, k int) string {
	return "pkts_" + dir + "_payload_le_" + strconv.FormatUint(SizeClassMax(k), 10)
}

// LiveValues implements source.Live: net.csv's row for the newest window
// that ends before the timeline's ReadTo (its messages all read, as
// sched's liveWindow says why), by column name (absent before there is
// one), and the cumulative counts named by LiveDrops, LivePkts, LiveBytes
// and LiveSizeKey.
func (s *Source) LiveValues() map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := map[string]float64{}
	if s.capt == nil {
		return v
	}
	read := s.env.Timeline.ReadTo()
	k := len(s.windows) - 1
	for k >= 0 && s.windows[k].end > read {
		k--
	}
	if k >= 0 {
		from, prev := s.netStart(), s.first
		prev.In, prev.Out = Counts{}, Counts{} // the capture counts from zero
		if k >= 1 {
			from, prev = s.windows[k-1].end, s.windows[k-1].snap
		}
		row := netRow(from, s.windows[k].end, prev, s.windows[k].snap, s.env.Timeline)
		v = recfile.Values(&row)
	}
	snap := s.capt.Snapshot()
	v[LiveDrops] = float64(snap.Drops)
	for d, dir := range [2]string{"in", "out"} {
		c := [2]Counts{snap.In, snap.Out}[d]
		v[LivePkts+dir], v[LiveBytes+dir] = float64(c.Packets), float64(c.PayloadBytes)
		for k := range SizeClasses {
			var n uint64
			for _, t := range s.capt.taps {
				n += t.dir[d].classes[k].Load()
			}
			if n > 0 {
				v[LiveSizeKey(dir, k)] = float64(n)
			}
		}
	}
	return v
}
