package mva

import (
	"errors"
	"fmt"
	"math"
)

// Station is one service centre visited once per message.
type Station struct {
	Name     string
	DemandNs float64 // mean service demand per message
	// Servers: 1 or more identical servers (M/M/c); 0 is a delay station
	// (infinite servers: no queueing).
	Servers int
	// Outside stations count in utilisation but not in ResponseNs (the
	// broker model's system place).
	Outside bool
}

// StationResult is one station's exact steady state.
type StationResult struct {
	Name string
	// Util is the busy servers' mean number (CPUs' worth): λ·D.
	Util float64
	// ResidenceNs is the mean time a message spends there, queueing
	// included; QueueLen the mean messages there (Little: λ·R).
	ResidenceNs float64
	QueueLen    float64
}

// Solution of an open network at one arrival rate.
type Solution struct {
	RateMsgs   float64 // λ, msg/s
	Stations   []StationResult
	ResponseNs float64 // Σ residence times of the stations not Outside
	Util       float64 // Σ Util of the stations not Outside
	SystemUtil float64 // Σ Util of all stations
}

// Open solves the open network at λ = rate msg/s. A station at or beyond
// saturation (λ·D ≥ servers) is an error: there is no steady state.
func Open(rate float64, stations []Station) (Solution, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return Solution{}, fmt.Errorf("rate %v msg/s: give a positive rate", rate)
	}
	sol := Solution{RateMsgs: rate}
	var errs []error
	for _, st := range stations {
		r, err := station(rate/1e9, st)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sol.Stations = append(sol.Stations, r)
		sol.SystemUtil += r.Util
		if !st.Outside {
			sol.Util += r.Util
			sol.ResponseNs += r.ResidenceNs
		}
	}
	return sol, errors.Join(errs...)
}

// station solves one station; lambda is in messages per ns.
func station(lambda float64, st Station) (StationResult, error) {
	d := st.DemandNs
	a := lambda * d // offered load, servers' worth
	r := StationResult{Name: st.Name, Util: a}
	switch {
	case d < 0 || st.Servers < 0:
		return r, fmt.Errorf("station %s: demand %v ns, %d servers", st.Name, d, st.Servers)
	case st.Servers == 0:
		r.ResidenceNs = d
	case a >= float64(st.Servers):
		return r, fmt.Errorf("station %s: saturated (λ·D = %.3f ≥ %d servers)", st.Name, a, st.Servers)
	default:
		c := float64(st.Servers)
		r.ResidenceNs = d + ErlangC(st.Servers, a)*d/(c-a)
	}
	r.QueueLen = lambda * r.ResidenceNs
	return r, nil
}

// ErlangC is the probability that an arrival waits at an M/M/c station
// with offered load a = λ·D < c.
func ErlangC(c int, a float64) float64 {
	// Σ_{k<c} a^k/k! and a^c/c!, by the recurrence term_k = term_{k-1}·a/k.
	sum, term := 0.0, 1.0
	for k := range c {
		if k > 0 {
			term *= a / float64(k)
		}
		sum += term
	}
	term *= a / float64(c)
	top := term / (1 - a/float64(c))
	return top / (sum + top)
}

// Saturation is the highest rate the network sustains (msg/s): the
// bottleneck station's servers / demand.
func Saturation(stations []Station) float64 {
	best := math.Inf(1)
	for _, st := range stations {
		if st.Servers > 0 && st.DemandNs > 0 {
			best = min(best, float64(st.Servers)/st.DemandNs*1e9)
		}
	}
	return best
}
