package analysis

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The seed's example: two messages sent 4.5 s and 4.7 s after the start of
// the test. Sender overhead 0.2 s, sender throughput 1/0.2 = 5 msg/s.
func TestSeedOverheadExample(t *testing.T) {
	s := Series{SentNs: []int64{4_500_000_000, 4_700_000_000}, RecvNs: []int64{4_600_000_000, 4_750_000_000}}
	so, err := SenderOverheadNs(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(so, []float64{200_000_000}) {
		t.Fatalf("SO = %v ns, want [2e8] (0.2 s)", so)
	}
	if st := ThroughputPerSec(so); !slices.Equal(st, []float64{5}) {
		t.Errorf("ST = %v msg/s, want [5]", st)
	}
	ro, _ := ReceiverOverheadNs(s, 1)
	if !slices.Equal(ro, []float64{150_000_000}) {
		t.Errorf("RO = %v ns, want [1.5e8]", ro)
	}
	if rt := ThroughputPerSec(ro); !near(rt[0], 1/0.15, 1e-15) {
		t.Errorf("RT = %v msg/s, want 6.667", rt)
	}
	l, _ := LatencyNs(s)
	if !slices.Equal(l, []int64{100_000_000, 50_000_000}) {
		t.Errorf("L = %v, want [1e8 5e7]", l)
	}
}

func TestWindowedOverhead(t *testing.T) {
	// Times 0, 10, 30, 60, 100 ns, M = 2: (30−0)/2, (60−10)/2, (100−30)/2.
	o, err := OverheadNs([]int64{0, 10, 30, 60, 100}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o, []float64{15, 25, 35}) {
		t.Errorf("overheads %v, want [15 25 35]", o)
	}
	// M = 4: one value, (100−0)/4.
	o, _ = OverheadNs([]int64{0, 10, 30, 60, 100}, 4)
	if !slices.Equal(o, []float64{25}) {
		t.Errorf("M=4: %v, want [25]", o)
	}
	// 100 messages 1 µs apart with M = 100 would need 101.
	if _, err := OverheadNs(make([]int64, 100), 100); err == nil || !strings.Contains(err.Error(), "too few") {
		t.Errorf("N = M: error %v, want 'too few'", err)
	}
	if _, err := OverheadNs(make([]int64, 5), 0); err == nil || !strings.Contains(err.Error(), "window") {
		t.Errorf("M = 0: error %v, want one naming the window", err)
	}
	// Zero overhead: infinite throughput, kept.
	if th := ThroughputPerSec([]float64{0, 1000}); !math.IsInf(th[0], 1) || th[1] != 1e6 {
		t.Errorf("throughputs %v, want [+Inf 1e6]", th)
	}
}

func TestCPUPerMessage(t *testing.T) {
	// CPU time 0, 5, 15, 15, 45 ms at 0, 10, 20, 30, 40 ms: half a CPU, a
	// whole one, idle, three CPUs (a multi-threaded broker).
	ms := int64(1_000_000)
	c, err := CPUPerMessage([]int64{0, 5 * ms, 15 * ms, 15 * ms, 45 * ms}, []int64{0, 10 * ms, 20 * ms, 30 * ms, 40 * ms})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c, []float64{0.5, 1, 0, 3}) {
		t.Errorf("C = %v, want [0.5 1 0 3]", c)
	}
	if _, err := CPUPerMessage([]int64{0, 1}, []int64{5, 5}); err == nil || !strings.Contains(err.Error(), "must increase") {
		t.Errorf("equal sample times: %v", err)
	}
	if _, err := CPUPerMessage([]int64{9, 1}, []int64{0, 5}); err == nil || !strings.Contains(err.Error(), "cannot fall") {
		t.Errorf("falling CPU time: %v", err)
	}
	if _, err := CPUPerMessage([]int64{0}, []int64{0, 1}); err == nil {
		t.Error("unequal lengths: no error")
	}
}

func TestIdentityHandExample(t *testing.T) {
	// M = 1: sent 0, 10, 20; received 5, 17, 24. L = 5, 7, 4;
	// SO = 10, 10; RO = 12, 7; RO − SO = 2, −3 = L_n − L_{n−1}.
	s := Series{SentNs: []int64{0, 10, 20}, RecvNs: []int64{5, 17, 24}}
	so, _ := SenderOverheadNs(s, 1)
	ro, _ := ReceiverOverheadNs(s, 1)
	l, _ := LatencyNs(s)
	for i := range so {
		if ro[i]-so[i] != float64(l[i+1]-l[i]) {
			t.Errorf("n=%d: RO−SO = %v, L_n−L_{n−1} = %v", i+1, ro[i]-so[i], l[i+1]-l[i])
		}
	}
	c, err := CheckIdentity(so, ro, l, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c.N != 2 || c.MaxAbsDevNs != 0 || c.MaxRelDev != 0 {
		t.Errorf("check %+v, want 2 values, no deviation", c)
	}
}

// constructedSeries is a realistic series: sends ~1 µs apart with jitter and
// bursts, latencies that drift, spike and recover, times ~1 hour into the
// monotonic clock.
func constructedSeries(n int, seed uint64) Series {
	rng := rand.New(rand.NewPCG(seed, 1))
	s := Series{IDs: make([]uint64, n), SentNs: make([]int64, n), RecvNs: make([]int64, n)}
	t := int64(3_600_000_000_000)
	lat := 50_000.0
	for i := range n {
		t += 500 + rng.Int64N(1000)
		if rng.IntN(1000) == 0 {
			t += 2_000_000 // a pause
		}
		lat += rng.NormFloat64() * 300
		lat = math.Max(lat, 5_000)
		if rng.IntN(500) == 0 {
			lat += 400_000 // a spike that decays
		}
		lat = 50_000 + (lat-50_000)*0.999
		s.IDs[i] = uint64(1000 + i)
		s.SentNs[i] = t
		s.RecvNs[i] = t + int64(lat)
	}
	return s
}

func TestIdentityConstructed(t *testing.T) {
	s := constructedSeries(200_000, 3)
	for _, m := range []int{1, 7, 100, 1000} {
		c, err := CheckIdentityTimes(s, m)
		if err != nil {
			t.Fatal(err)
		}
		if c.N != s.Len()-m || !(c.MaxRelDev <= 1e-9) {
			t.Errorf("M=%d: %+v, want %d values within 1e-9", m, c, s.Len()-m)
		}
		if m == 1 && c.MaxAbsDevNs != 0 {
			// Integer differences below 2⁵³ are exact in float64.
			t.Errorf("M=1: deviation %v ns, want exactly 0", c.MaxAbsDevNs)
		}
	}

	// Latencies misaligned by one message (a join off by one): the check
	// finds it.
	l, _ := LatencyNs(s)
	so, _ := SenderOverheadNs(s, 100)
	ro, _ := ReceiverOverheadNs(s, 100)
	shifted := append([]int64{l[0]}, l[:len(l)-1]...)
	c, err := CheckIdentity(so, ro, shifted, 100)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxAbsDevNs < 1 || c.MaxRelDev < 1e-3 {
		t.Errorf("misaligned latencies: %+v, want a deviation of at least 1 ns", c)
	}
	// Overheads of another window: refused.
	if _, err := CheckIdentity(so, ro, l, 99); err == nil {
		t.Error("window mismatch: no error")
	}
}
