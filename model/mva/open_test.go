package mva

import (
	"math"
	"testing"
)

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.12g, want %.12g", what, got, want)
	}
}

// Textbook values: M/M/1 at ρ = 0.5 doubles the demand; M/M/2 with
// offered load 1 waits with probability 1/3 (Erlang C) and resides
// D + (1/3)·D/(2 − 1) = 4/3 D; a delay station resides D; the outside
// station counts in system utilisation only.
func TestOpenKnownValues(t *testing.T) {
	sol, err := Open(10000, []Station{
		{Name: "mm1", DemandNs: 50e3, Servers: 1},
		{Name: "mm2", DemandNs: 100e3, Servers: 2},
		{Name: "delay", DemandNs: 7e3},
		{Name: "system", DemandNs: 20e3, Servers: 1, Outside: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "mm1 residence", sol.Stations[0].ResidenceNs, 100e3)
	near(t, "mm2 residence", sol.Stations[1].ResidenceNs, 100e3*4/3)
	near(t, "delay residence", sol.Stations[2].ResidenceNs, 7e3)
	near(t, "system residence", sol.Stations[3].ResidenceNs, 20e3/0.8)
	near(t, "response", sol.ResponseNs, 100e3+100e3*4/3+7e3)
	near(t, "util", sol.Util, 0.5+1+0.07)
	near(t, "system util", sol.SystemUtil, 0.5+1+0.07+0.2)
	near(t, "mm1 queue (Little)", sol.Stations[0].QueueLen, 1)
	near(t, "Erlang C(2, 1)", ErlangC(2, 1), 1.0/3)
	near(t, "Erlang C(1, ρ) = ρ", ErlangC(1, 0.7), 0.7)
	near(t, "saturation", Saturation([]Station{{DemandNs: 50e3, Servers: 1}, {DemandNs: 100e3, Servers: 2}, {DemandNs: 1e9}}), 20000)
}

func TestOpenSaturatedIsAnError(t *testing.T) {
	if _, err := Open(20000, []Station{{Name: "a", DemandNs: 50e3, Servers: 1}}); err == nil {
		t.Error("λD = 1: no error")
	}
	if _, err := Open(0, []Station{{Name: "a", DemandNs: 50e3, Servers: 1}}); err == nil {
		t.Error("rate 0: no error")
	}
}
