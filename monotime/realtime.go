package monotime

import "time"

// RealtimeOffset measures CLOCK_REALTIME − CLOCK_MONOTONIC in nanoseconds,
// the mapping between the kernel's packet timestamps (realtime) and every
// other time brokertrace writes (monotonic). Each of tries reads brackets
// one realtime read between two monotonic reads; the tightest bracket
// wins, because a preemption or an interrupt between the reads only ever
// widens it. The offset is taken at the bracket's middle, so it is off by
// at most uncertainty, half the bracket (about 20–50 ns on an idle core).
func RealtimeOffset(tries int) (offset, uncertainty int64) {
	best := int64(-1)
	for range max(tries, 1) {
		m1 := Now()
		r := time.Now().UnixNano()
		m2 := Now()
		if w := m2 - m1; best < 0 || w < best {
			best = w
			offset = r - (m1 + w/2)
		}
	}
	return offset, (best + 1) / 2
}
