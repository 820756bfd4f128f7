package sim

import (
	"math"
	"testing"
)

func det(name string, ns float64) Stage {
	return Stage{Name: name, Demand: Demand{Kind: Deterministic, MeanNs: ns}}
}

// latencies runs the simulation and returns every measured latency by index.
func latencies(t *testing.T, m *Model, a Arrivals, o Options) (*Result, map[int]float64) {
	t.Helper()
	got := map[int]float64{}
	o.OnMessage = func(i int, l float64) { got[i] = l }
	r, err := Run(m, a, o)
	if err != nil {
		t.Fatal(err)
	}
	return r, got
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.9g, want %.9g ± %.3g", what, got, want, tol)
	}
}

// One deterministic stage below saturation: every message finds the thread
// idle, so its latency is exactly D, the utilisation exactly λ·D and the
// throughput exactly λ over the window of whole periods.
func TestOneStageDeterministic(t *testing.T) {
	m := &Model{Stages: []Stage{det("accept-msg", 50e3)}, CPUs: 1, SwitchPenaltyNs: 7e3, QuantumNs: 1e6}
	r, lat := latencies(t, m, Arrivals{Pattern: Regular, Rate: 10000}, Options{Messages: 1000, Warmup: 10})
	if len(lat) != 1000 || r.Latency.Count() != 1000 {
		t.Fatalf("%d latencies, histogram %d: want 1000", len(lat), r.Latency.Count())
	}
	for i, l := range lat {
		if l != 50e3 {
			t.Fatalf("message %d latency %v ns, want exactly 50000", i, l)
		}
	}
	near(t, "throughput", r.Throughput, 10000, 1e-6)
	near(t, "broker util", r.BrokerUtil, 0.5, 1e-12)
	near(t, "p99", r.Latency.Quantile(0.99), 50e3, 0)
	if r.Switches != 0 {
		t.Errorf("%d switches with one thread", r.Switches)
	}
}

// Two stages on one CPU at low load: every token is served after the CPU
// ran the other thread, so each pays c: latency Da + Db + 2c exactly, two
// switches per message, utilisation λ(Da + Db + 2c). An outside stage
// adds its CPU (and one more switch each way) but no latency.
func TestSwitchPenaltyLowLoad(t *testing.T) {
	const da, db, ds, c, rate = 10e3, 20e3, 5e3, 2e3, 1000.0
	m := &Model{Stages: []Stage{det("accept-msg", da), det("dispatch", db), {Name: "system", Outside: true, Demand: Demand{Kind: Deterministic, MeanNs: ds}}},
		CPUs: 1, SwitchPenaltyNs: c}
	r, lat := latencies(t, m, Arrivals{Pattern: Regular, Rate: rate}, Options{Messages: 500, Warmup: 5})
	for i, l := range lat {
		if math.Abs(l-(da+db+2*c)) > 1e-6 {
			t.Fatalf("message %d latency %v, want %v", i, l, da+db+2*c)
		}
	}
	near(t, "switches per message", r.SwitchesPerMsg, 3, 1e-9)
	near(t, "broker util", r.BrokerUtil, rate*(da+db+2*c)/1e9, 1e-9)
	near(t, "system util", r.SystemUtil, rate*(da+db+ds+3*c)/1e9, 1e-9)
	near(t, "system stage util", r.StageUtil[2], rate*(ds+c)/1e9, 1e-9)
}

// The quantum by hand: four messages at once, two 10 µs stages on one CPU,
// c = 1 µs, q = 25 µs. A serves tokens 1-3 (0-30: 30 ≥ q with B waiting),
// B pays c and serves 1-3 (30-41-51-61), A pays c for token 4 (61-72),
// B pays c for it (72-83): latencies 41, 51, 61, 83; three switches.
func TestQuantumByHand(t *testing.T) {
	m := &Model{Stages: []Stage{det("accept-msg", 10), det("dispatch", 10)}, CPUs: 1, SwitchPenaltyNs: 1, QuantumNs: 25}
	r, lat := latencies(t, m, Arrivals{Pattern: Bursty, Rate: 4, Burst: 4}, Options{Messages: 4})
	want := map[int]float64{0: 41, 1: 51, 2: 61, 3: 83}
	for i, w := range want {
		if lat[i] != w {
			t.Errorf("message %d latency %v, want %v", i, lat[i], w)
		}
	}
	if r.Switches != 3 {
		t.Errorf("%d switches, want 3", r.Switches)
	}
	near(t, "broker util", r.BrokerUtil, 83/1e9, 1e-15)
	// Without the quantum A serves all four first: B's tokens end at
	// 51, 61, 71, 81.
	m.QuantumNs = 0
	_, lat = latencies(t, m, Arrivals{Pattern: Bursty, Rate: 4, Burst: 4}, Options{Messages: 4})
	for i, w := range []float64{51, 61, 71, 81} {
		if lat[i] != w {
			t.Errorf("no quantum: message %d latency %v, want %v", i, lat[i], w)
		}
	}
}

// GC: a pause of P after every N-th message entering stops the broker's
// threads before they start it, so exactly every N-th message's latency
// grows by P; the others keep D.
func TestGCPauseEveryN(t *testing.T) {
	const d, p, n = 10e3, 30e3, 5
	m := &Model{Stages: []Stage{det("accept-msg", d)}, CPUs: 1, GCThreshold: n, GCPauseNs: p}
	_, lat := latencies(t, m, Arrivals{Pattern: Regular, Rate: 10000}, Options{Messages: 100})
	for i := range 100 {
		want := d
		if (i+1)%n == 0 {
			want = d + p
		}
		if lat[i] != want {
			t.Errorf("message %d latency %v, want %v", i, lat[i], want)
		}
	}
}

// A queue of capacity 1 at twice the service rate: flow control holds the
// rest outside, so every latency is exactly D, the throughput is 1/D, and
// the wait outside grows by D/2 per message.
func TestQueueCapacityFlowControl(t *testing.T) {
	const d = 100e3
	m := &Model{Stages: []Stage{det("accept-msg", d)}, CPUs: 1, QueueCapacity: 1}
	r, lat := latencies(t, m, Arrivals{Pattern: Regular, Rate: 2e9 / d}, Options{Messages: 2000})
	for i, l := range lat {
		if l != d {
			t.Fatalf("message %d latency %v, want %v", i, l, d)
		}
	}
	near(t, "throughput", r.Throughput, 1e9/d, 1e9/d/1000)
	near(t, "broker util", r.BrokerUtil, 1, 1e-3)
	// message i enters at i·D, arrived at i·D/2: mean wait D/2 · mean i.
	near(t, "mean wait outside", r.InputWaitMeanNs, d/2*1999/2, 1e-3)
	if r.MaxInBroker != 1 {
		t.Errorf("max in broker %d, want 1", r.MaxInBroker)
	}
}

func TestDeterministicForSeed(t *testing.T) {
	exp := func(ns float64) Demand { return Demand{Kind: Exponential, MeanNs: ns} }
	m := &Model{Stages: []Stage{{Name: "a", Demand: exp(10e3)}, {Name: "b", Demand: exp(15e3)}}, CPUs: 1, SwitchPenaltyNs: 1e3, QuantumNs: 50e3}
	run := func(seed uint64) *Result {
		r, err := Run(m, Arrivals{Pattern: Regular, Rate: 20000}, Options{Messages: 5000, Warmup: 100, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b, c := run(1), run(1), run(2)
	if a.Latency.Mean() != b.Latency.Mean() || a.BrokerUtil != b.BrokerUtil || a.Switches != b.Switches {
		t.Errorf("same seed, different results: %v/%v, %v/%v", a.Latency.Mean(), b.Latency.Mean(), a.BrokerUtil, b.BrokerUtil)
	}
	if a.Latency.Mean() == c.Latency.Mean() {
		t.Errorf("seeds 1 and 2 gave the same mean latency %v", a.Latency.Mean())
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	good := &Model{Stages: []Stage{det("a", 1)}, CPUs: 1}
	for name, tc := range map[string]struct {
		m *Model
		a Arrivals
		o Options
	}{
		"no cpus":        {&Model{Stages: []Stage{det("a", 1)}}, Arrivals{Pattern: Regular, Rate: 1}, Options{Messages: 1}},
		"only outside":   {&Model{Stages: []Stage{{Name: "s", Outside: true, Demand: Demand{Kind: Deterministic, MeanNs: 1}}}, CPUs: 1}, Arrivals{Pattern: Regular, Rate: 1}, Options{Messages: 1}},
		"outside first":  {&Model{Stages: []Stage{{Name: "s", Outside: true}, det("a", 1)}, CPUs: 1}, Arrivals{Pattern: Regular, Rate: 1}, Options{Messages: 1}},
		"empirical none": {&Model{Stages: []Stage{{Name: "a", Demand: Demand{Kind: Empirical, MeanNs: 1}}}, CPUs: 1}, Arrivals{Pattern: Regular, Rate: 1}, Options{Messages: 1}},
		"zero rate":      {good, Arrivals{Pattern: Regular}, Options{Messages: 1}},
		"no burst":       {good, Arrivals{Pattern: Bursty, Rate: 1}, Options{Messages: 1}},
		"pattern":        {good, Arrivals{Pattern: "poisson", Rate: 1}, Options{Messages: 1}},
		"backwards":      {good, Arrivals{Pattern: Measured, TimesNs: []int64{5, 3, 9}}, Options{Messages: 1}},
		"no messages":    {good, Arrivals{Pattern: Regular, Rate: 1}, Options{}},
	} {
		if _, err := Run(tc.m, tc.a, tc.o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Measured arrival times are replayed as given: two messages 1 µs apart
// into a 10 µs stage, then a gap: the second waits 9 µs.
func TestMeasuredArrivals(t *testing.T) {
	m := &Model{Stages: []Stage{det("a", 10e3)}, CPUs: 1}
	times := []int64{1000, 2000, 100000, 101000, 200000, 201000, 300000}
	r, lat := latencies(t, m, Arrivals{Pattern: Measured, TimesNs: times}, Options{Messages: 100})
	if r.End-r.First != 6 {
		t.Fatalf("measured %d messages, want 6 (the 7th time closes the window)", r.End-r.First)
	}
	for i := range 6 {
		want := 10e3
		if i%2 == 1 {
			want = 19e3
		}
		if lat[i] != want {
			t.Errorf("message %d latency %v, want %v", i, lat[i], want)
		}
	}
	near(t, "offered rate", r.OfferedRate, 6/299e-6, 1e-6)
}

// The wake-up costs by hand: two stages on one CPU at low load. Each
// message wakes the parked CPU for A (W of CPU, L late) and B (queued
// while A runs, so no cost): two wake-ups and one unpark per message, and
// latency Da + Db, as it is measured from A's read, which the wake-up
// precedes. In bursts of four A and B wake once per burst,
// and the utilisation falls by the wake-ups saved.
func TestWakePenaltyPerWakeup(t *testing.T) {
	const da, db, w, l, rate = 10e3, 20e3, 15e3, 7e3, 1000.0
	m := &Model{Stages: []Stage{det("accept-msg", da), det("dispatch", db)}, CPUs: 1, WakePenaltyNs: w, WakeLatencyNs: l}
	r, lat := latencies(t, m, Arrivals{Pattern: Regular, Rate: rate}, Options{Messages: 400, Warmup: 4})
	for i, x := range lat {
		if math.Abs(x-(da+db)) > 1e-6 {
			t.Fatalf("message %d latency %v, want %v", i, x, da+db)
		}
	}
	near(t, "wake-ups per message", r.WakeupsPerMsg, 2, 1e-9)
	near(t, "unparks per message", r.UnparksPerMsg, 1, 1e-9)
	near(t, "broker util", r.BrokerUtil, rate*(da+db+w)/1e9, 1e-9)
	b, _ := latencies(t, m, Arrivals{Pattern: Bursty, Rate: rate, Burst: 4}, Options{Messages: 400, Warmup: 4})
	near(t, "bursty wake-ups per message", b.WakeupsPerMsg, 0.5, 1e-9)
	near(t, "bursty broker util", b.BrokerUtil, rate*(da+db+0.25*w)/1e9, 1e-9)

	// The system's CPU per wake-up: in the system's utilisation, per
	// wake-up of a broker thread (two a message, half one in bursts of
	// four), not in the broker's, and no latency.
	const sw = 9e3
	m.SystemWakeNs = sw
	r, lat = latencies(t, m, Arrivals{Pattern: Regular, Rate: rate}, Options{Messages: 400, Warmup: 4})
	near(t, "broker util with system wake cost", r.BrokerUtil, rate*(da+db+w)/1e9, 1e-9)
	near(t, "system util", r.SystemUtil, rate*(da+db+w+2*sw)/1e9, 1e-9)
	near(t, "latency with system wake cost", lat[7], da+db, 1e-6)
	b, _ = latencies(t, m, Arrivals{Pattern: Bursty, Rate: rate, Burst: 4}, Options{Messages: 400, Warmup: 4})
	near(t, "bursty system util", b.SystemUtil, rate*(da+db+0.25*w+0.5*sw)/1e9, 1e-9)
}

// Polling by hand: an idle CPU polls for S before it parks. With S
// shorter than the idle gap every message still unparks the CPU, and each
// gap adds S of the broker's CPU; with S longer than the gap the polling
// CPU takes every arrival at once, never parks and is never idle.
func TestSpinBeforePark(t *testing.T) {
	const da, db, w, rate = 10e3, 20e3, 15e3, 1000.0 // gap 1 ms − 45 µs of work
	m := &Model{Stages: []Stage{det("accept-msg", da), det("dispatch", db)}, CPUs: 1, WakePenaltyNs: w, SpinNs: 100e3}
	r, _ := latencies(t, m, Arrivals{Pattern: Regular, Rate: rate}, Options{Messages: 400, Warmup: 4})
	near(t, "unparks per message", r.UnparksPerMsg, 1, 1e-9)
	near(t, "spin util", r.SpinUtil, rate*100e3/1e9, 1e-9)
	near(t, "broker util", r.BrokerUtil, rate*(da+db+w+100e3)/1e9, 1e-9)
	m.SpinNs = 2e6
	r, lat := latencies(t, m, Arrivals{Pattern: Regular, Rate: rate}, Options{Messages: 400, Warmup: 4})
	near(t, "caught: unparks per message", r.UnparksPerMsg, 0, 0)
	near(t, "caught: wake-ups per message", r.WakeupsPerMsg, 1, 1e-9) // B, queued while A runs
	near(t, "caught: broker util", r.BrokerUtil, 1, 1e-9)
	for i, x := range lat {
		if math.Abs(x-(da+db)) > 1e-6 {
			t.Fatalf("message %d latency %v, want %v (taken by the polling CPU)", i, x, da+db)
		}
	}
	// A background of 5%: added where the CPU parks, and in place of
	// polling where it never does — one CPU is never more than full.
	m.BackgroundUtil = 0.05
	r, _ = latencies(t, m, Arrivals{Pattern: Regular, Rate: rate}, Options{Messages: 400, Warmup: 4})
	near(t, "caught, with a background: broker util", r.BrokerUtil, 1, 1e-9)
	m.SpinNs = 100e3
	r, _ = latencies(t, m, Arrivals{Pattern: Regular, Rate: rate}, Options{Messages: 400, Warmup: 4})
	near(t, "parked, with a background: broker util", r.BrokerUtil, rate*(da+db+w+100e3)/1e9+0.05, 1e-9)
}

// The arrivals' coefficient of variation over the window: 0 for one
// message every 1/r, √(b−1) = 3 for bursts of ten, and by hand for
// measured times 0, 0, 10, 30 (gaps 0, 10, 20: mean 10, sd √(200/3)).
func TestArrivalCV(t *testing.T) {
	m := &Model{Stages: []Stage{det("accept-msg", 1e3)}, CPUs: 1}
	for _, c := range []struct {
		a    Arrivals
		n    int
		want float64
	}{
		{Arrivals{Pattern: Regular, Rate: 1000}, 100, 0},
		{Arrivals{Pattern: Bursty, Rate: 1000, Burst: 10}, 100, 3},
		{Arrivals{Pattern: Measured, TimesNs: []int64{0, 0, 10, 30}}, 3, math.Sqrt(200.0/3) / 10},
	} {
		r, err := Run(m, c.a, Options{Messages: c.n})
		if err != nil {
			t.Fatal(err)
		}
		near(t, c.a.Pattern+" arrival CV", r.ArrivalCV, c.want, 1e-9)
	}
}
