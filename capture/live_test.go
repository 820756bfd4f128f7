package capture

import "testing"

// Every payload size falls in the class whose bounds hold it, the bounds
// being the powers of two Prometheus's schema-0 buckets have.
func TestSizeClassBounds(t *testing.T) {
	for n := 0; n <= 1<<17+3; n++ {
		k := SizeClass(n)
		lo := -1.0
		if k > 0 {
			lo = float64(SizeClassMax(k)) / 2
			if k == 1 {
				lo = 0
			}
		}
		if float64(n) <= lo || uint64(n) > SizeClassMax(k) {
			t.Fatalf("payload %d in class %d: (%v, %d]", n, k, lo, SizeClassMax(k))
		}
	}
	if k := SizeClass(1 << 40); k != SizeClasses-1 {
		t.Fatalf("a huge payload in class %d, want the last, %d", k, SizeClasses-1)
	}
}

// BenchmarkCount is the tap's per-segment bookkeeping (counters, exact
// size histogram, live size class) on a mix of sizes: the live classes'
// share of the capture path's cost.
func BenchmarkCount(b *testing.B) {
	var d dirCounts
	sizes := []int{0, 64, 200, 1448, 1448, 65483, 3, 512}
	segs := make([]segment, len(sizes))
	for i, n := range sizes {
		segs[i] = segment{payload: n, flags: tcpACK}
	}
	for i := 0; b.Loop(); i++ {
		d.count(&segs[i%len(segs)])
	}
}
