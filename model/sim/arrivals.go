package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Arrival patterns: ICPE'14 §5 "producing one message every 1/r" or "ten
// messages every 10/r", or the arrival times a recording measured.
const (
	Regular  = "regular"
	Bursty   = "bursty"
	Measured = "measured"
)

// Arrivals is when messages reach the broker.
type Arrivals struct {
	Pattern string
	Rate    float64 // msg/s (regular, bursty)
	Burst   int     // messages per burst (bursty)
	// TimesNs are the measured arrival times (measured), non-decreasing;
	// only their differences matter.
	TimesNs []int64
}

func (a *Arrivals) validate() error {
	switch a.Pattern {
	case Regular, Bursty:
		if !(a.Rate > 0) || math.IsInf(a.Rate, 0) {
			return fmt.Errorf("rate %v msg/s: give a positive rate", a.Rate)
		}
		if a.Pattern == Bursty && a.Burst < 1 {
			return fmt.Errorf("burst %d: give at least 1 message per burst", a.Burst)
		}
	case Measured:
		if len(a.TimesNs) < 2 {
			return errors.New("measured arrivals: need at least 2 times")
		}
		if !slices.IsSorted(a.TimesNs) {
			return errors.New("measured arrivals: times go backwards")
		}
	default:
		return fmt.Errorf("pattern %q: give regular, bursty or measured", a.Pattern)
	}
	return nil
}

// total is how many messages the pattern has: unbounded but for measured.
func (a *Arrivals) total() int {
	if a.Pattern == Measured {
		return len(a.TimesNs)
	}
	return math.MaxInt
}

// at is message i's arrival time, ns from the first.
func (a *Arrivals) at(i int) float64 {
	switch a.Pattern {
	case Bursty:
		return float64(i/a.Burst) * float64(a.Burst) * 1e9 / a.Rate
	case Measured:
		return float64(a.TimesNs[i] - a.TimesNs[0])
	}
	return float64(i) * 1e9 / a.Rate
}

// window rounds warm-up and messages up to whole bursts and returns the
// measured messages' indices [first, end); end's arrival closes the window.
func (a *Arrivals) window(warmup, messages int) (first, end int, err error) {
	if messages < 1 || warmup < 0 {
		return 0, 0, fmt.Errorf("%d messages after %d of warm-up: give at least 1 message", messages, warmup)
	}
	if a.Pattern == Bursty {
		up := func(n int) int { return (n + a.Burst - 1) / a.Burst * a.Burst }
		warmup, messages = up(warmup), up(messages)
	}
	if a.Pattern == Measured {
		messages = min(messages, len(a.TimesNs)-1-warmup)
		if messages < 1 {
			return 0, 0, fmt.Errorf("%d measured arrival times: fewer than %d of warm-up + 2", len(a.TimesNs), warmup)
		}
	}
	return warmup, warmup + messages, nil
}

// gapCV is the coefficient of variation of the gaps between the arrivals
// of messages [first, end]; 0 when they all arrive at once.
func (a *Arrivals) gapCV(first, end int) float64 {
	var sum, sq float64
	for i := first; i < end; i++ {
		g := a.at(i+1) - a.at(i)
		sum, sq = sum+g, sq+g*g
	}
	n := float64(end - first)
	if n < 1 || sum <= 0 {
		return 0
	}
	mean := sum / n
	return math.Sqrt(max(sq/n-mean*mean, 0)) / mean
}
