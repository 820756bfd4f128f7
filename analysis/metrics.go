package analysis

import (
	"errors"
	"fmt"
	"math"
)

// Series is the two times of each message on one path through the system,
// message n at index n in the order the messages were sent: O_n, when the
// message left (SentNs), and I_n, when it arrived (RecvNs). Both are
// CLOCK_MONOTONIC ns of one machine.
//
// End to end (e2e.csv): O_n = t_send_ns, I_n = t_recv_ns. Inside the broker
// (messages.csv): the message is "sent" into the broker when the broker
// reads it (O_n = t_in_ns) and "received" out of it when the broker writes
// it (I_n = t_out_ns).
type Series struct {
	IDs    []uint64
	SentNs []int64 // O_n
	RecvNs []int64 // I_n
}

// Len is the number of messages.
func (s Series) Len() int { return len(s.SentNs) }

func (s Series) check() error {
	if len(s.SentNs) != len(s.RecvNs) || (s.IDs != nil && len(s.IDs) != len(s.SentNs)) {
		return fmt.Errorf("series has %d ids, %d send and %d receive times: give one of each per message",
			len(s.IDs), len(s.SentNs), len(s.RecvNs))
	}
	return nil
}

// LatencyNs returns L_n = I_n − O_n for every message: the time from leaving
// to arriving, in ns.
func LatencyNs(s Series) ([]int64, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	l := make([]int64, len(s.SentNs))
	for i := range l {
		l[i] = s.RecvNs[i] - s.SentNs[i]
	}
	return l, nil
}

// OverheadNs returns the windowed overhead (T_n − T_{n−M})/M of the times T,
// in ns per message, for messages n = M … N−1: element i belongs to message
// n = i+M (the overhead is undefined for the first M messages). With T the
// send times it is the sender overhead SO_n, with the receive times the
// receiver overhead RO_n; M = 1 is the seed's plain SO_n = O_n − O_{n−1}.
//
// Receive times need not increase (messages can overtake each other), so an
// overhead can be zero or negative; it is returned as it is.
func OverheadNs(timesNs []int64, m int) ([]float64, error) {
	if m < 1 {
		return nil, fmt.Errorf("window M = %d: give a window of at least 1 message (100 is the usual)", m)
	}
	if len(timesNs) <= m {
		return nil, fmt.Errorf("%d messages are too few for a window of M = %d: the overhead needs more than M messages; lower the window or send more",
			len(timesNs), m)
	}
	o := make([]float64, len(timesNs)-m)
	fm := float64(m)
	for i := range o {
		o[i] = float64(timesNs[i+m]-timesNs[i]) / fm
	}
	return o, nil
}

// SenderOverheadNs is SO_n = (O_n − O_{n−M})/M for n = M … N−1, in ns.
func SenderOverheadNs(s Series, m int) ([]float64, error) { return OverheadNs(s.SentNs, m) }

// ReceiverOverheadNs is RO_n = (I_n − I_{n−M})/M for n = M … N−1, in ns.
func ReceiverOverheadNs(s Series, m int) ([]float64, error) { return OverheadNs(s.RecvNs, m) }

// NsPerSec converts a rate per ns into a rate per second.
const NsPerSec = 1e9

// ThroughputPerSec turns overheads in ns per message into throughputs in
// messages per second: ST_n = 1/SO_n, RT_n = 1/RO_n, × 10⁹ ns/s. A zero
// overhead (M messages within the same ns) gives +Inf, an undefined rate the
// seed warns of; it stays in the series so that it is counted, not lost.
func ThroughputPerSec(overheadNs []float64) []float64 {
	t := make([]float64, len(overheadNs))
	for i, o := range overheadNs {
		t[i] = NsPerSec / o
	}
	return t
}

// CPUPerMessage returns C_n = (U_n − U_{n−1})/(T_n − T_{n−1}) for n = 1 …
// N−1 (element i belongs to sample i+1): the share of one CPU the process
// used between two samples, 1 meaning one whole CPU (× 100 for the seed's
// %). U is the CPU time the process has used so far and T the time of the
// sample, both in ns (convert clock ticks first: × 10⁹/USER_HZ). Samples may
// be taken for every message or, as the seed suggests when that is too
// costly, for every k-th message, the load spread evenly over the k.
func CPUPerMessage(cpuNs, atNs []int64) ([]float64, error) {
	if len(cpuNs) != len(atNs) {
		return nil, fmt.Errorf("%d CPU times but %d sample times: give one of each per sample", len(cpuNs), len(atNs))
	}
	if len(atNs) < 2 {
		return nil, errors.New("CPU per message needs at least two samples")
	}
	c := make([]float64, len(atNs)-1)
	for i := range c {
		dt := atNs[i+1] - atNs[i]
		du := cpuNs[i+1] - cpuNs[i]
		if dt <= 0 {
			return nil, fmt.Errorf("sample %d is at %d ns, not after sample %d at %d ns: sample times must increase",
				i+1, atNs[i+1], i, atNs[i])
		}
		if du < 0 {
			return nil, fmt.Errorf("CPU time falls from %d ns at sample %d to %d ns at sample %d: CPU times are cumulative and cannot fall; check the samples are of one process",
				cpuNs[i], i, cpuNs[i+1], i+1)
		}
		c[i] = float64(du) / float64(dt)
	}
	return c, nil
}

// IdentityCheck is how far the derived series are from the seed's identity
// between overheads and latency. For M = 1 the seed gives
// RO_n − SO_n = L_n − L_{n−1}; for a window of M messages
//
//	RO_n − SO_n = (I_n − I_{n−M})/M − (O_n − O_{n−M})/M
//	            = ((I_n − O_n) − (I_{n−M} − O_{n−M}))/M
//	            = (L_n − L_{n−M})/M,
//
// an algebraic identity. It holds to rounding for series derived from one
// consistent set of times, and fails when series were misaligned (one shifted
// by a message, joined by the wrong id, computed with another window).
type IdentityCheck struct {
	N int `json:"n"` // messages compared (n = M … N−1)
	// MaxAbsDevNs is max |RO_n − SO_n − (L_n − L_{n−M})/M| in ns.
	MaxAbsDevNs float64 `json:"max_abs_dev_ns"`
	// MaxRelDev is the largest deviation relative to the largest magnitude
	// of the three terms at that message (1 ns when all are smaller): float64
	// rounding keeps it below ~10⁻¹⁵.
	MaxRelDev float64 `json:"max_rel_dev"`
	// At is the message n with the largest relative deviation.
	At int `json:"at"`
}

// CheckIdentity checks RO_n − SO_n = (L_n − L_{n−M})/M on series as
// OverheadNs and LatencyNs return them (so and ro start at message M).
func CheckIdentity(soNs, roNs []float64, latNs []int64, m int) (IdentityCheck, error) {
	if m < 1 {
		return IdentityCheck{}, fmt.Errorf("window M = %d: give the window the overheads were computed with", m)
	}
	if len(soNs) != len(roNs) || len(soNs) != len(latNs)-m {
		return IdentityCheck{}, fmt.Errorf("%d sender and %d receiver overheads do not match %d latencies with a window of %d (want %d of each): compute them from the same series and window",
			len(soNs), len(roNs), len(latNs), m, len(latNs)-m)
	}
	c := IdentityCheck{N: len(soNs), At: -1}
	fm := float64(m)
	for i := range soNs {
		n := i + m
		dl := float64(latNs[n]-latNs[n-m]) / fm
		dev := math.Abs(roNs[i] - soNs[i] - dl)
		scale := max(math.Abs(roNs[i]), math.Abs(soNs[i]), math.Abs(dl), 1)
		if dev > c.MaxAbsDevNs {
			c.MaxAbsDevNs = dev
		}
		if rel := dev / scale; rel > c.MaxRelDev || c.At < 0 {
			c.MaxRelDev, c.At = rel, n
		}
		if dev != dev { // NaN: report it, it is the worst
			c.MaxAbsDevNs, c.MaxRelDev, c.At = math.NaN(), math.NaN(), n
			break
		}
	}
	return c, nil
}

// CheckIdentityTimes derives SO, RO and L from s with window m and checks
// the identity on them.
func CheckIdentityTimes(s Series, m int) (IdentityCheck, error) {
	l, err := LatencyNs(s)
	if err != nil {
		return IdentityCheck{}, err
	}
	so, err := SenderOverheadNs(s, m)
	if err != nil {
		return IdentityCheck{}, err
	}
	ro, err := ReceiverOverheadNs(s, m)
	if err != nil {
		return IdentityCheck{}, err
	}
	return CheckIdentity(so, ro, l, m)
}
