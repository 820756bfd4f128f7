package clocksync

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// obs is one segment seen at both ends: t is A's time of it, d = tB − tA
// (θ + delay when A sent it, θ − delay when B did).
type obs struct {
	t   int64
	d   int64
	fwd bool // A → B
}

// minPerDir is how many segments each way a connection needs before its
// direction is trusted.
const minPerDir = 5

// match pairs the segments seen once by each host and orients each
// connection: for a segment from A, tB − tA = θ + delay; from B, θ − delay.
// So of a connection's two directions the one with the larger clock
// differences runs A → B, whatever θ is (upward); no address needs to be
// known as A's or B's (NAT aside, which would change the segments). It
// returns the observations and how many connections gave them.
func match(a, b map[key]sighting) ([]obs, int) {
	type dirs struct{ up, down []obs } // up: lo → hi
	byConn := map[conn]*dirs{}
	for k, sa := range a {
		sb, ok := b[k]
		if !ok || sa.n != 1 || sb.n != 1 {
			continue
		}
		c, up := connOf(k)
		ds := byConn[c]
		if ds == nil {
			ds = &dirs{}
			byConn[c] = ds
		}
		o := obs{t: sa.t, d: sb.t - sa.t}
		if up {
			ds.up = append(ds.up, o)
		} else {
			ds.down = append(ds.down, o)
		}
	}
	var out []obs
	conns := 0
	for _, ds := range byConn {
		if len(ds.up) < minPerDir || len(ds.down) < minPerDir {
			continue
		}
		conns++
		upFwd := upward(ds.up, ds.down)
		for _, o := range ds.up {
			o.fwd = upFwd
			out = append(out, o)
		}
		for _, o := range ds.down {
			o.fwd = !upFwd
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(x, y obs) int { return cmp.Compare(x.t, y.t) })
	return out, conns
}

// voteNs is the window in which upward compares the two directions: short
// enough that a drift cannot move θ by as much as a delay within it
// (100 ppm over 20 ms: 2 µs), where over a whole recording it moves θ by
// far more (37 ppm over 13 s: 480 µs), so that medians taken over all of
// it can put the wrong direction first when one direction's segments
// bunch at one end.
const voteNs = 20_000_000

// upward reports whether a connection's up direction runs A → B: in each
// window of A's time with segments both ways, the direction whose clock
// differences have the larger median is A → B; the most windows decide.
func upward(up, down []obs) bool {
	type pair struct{ up, down []obs }
	wins := map[int64]*pair{}
	at := func(o obs) *pair {
		w := wins[o.t/voteNs]
		if w == nil {
			w = &pair{}
			wins[o.t/voteNs] = w
		}
		return w
	}
	for _, o := range up {
		at(o).up = append(at(o).up, o)
	}
	for _, o := range down {
		at(o).down = append(at(o).down, o)
	}
	votes := 0
	for _, w := range wins {
		if len(w.up) == 0 || len(w.down) == 0 {
			continue
		}
		if median(w.up) > median(w.down) {
			votes++
		} else {
			votes--
		}
	}
	return votes > 0
}

func median(xs []obs) int64 {
	ds := make([]int64, len(xs))
	for i, o := range xs {
		ds[i] = o.d
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BinNs is the width of the time bins (A's clock): each gives one
// minimum-delay estimate of the offset. Narrow enough that a recording of
// seconds gives tens of points for the drift, wide enough that each holds
// segments both ways with a near-minimal delay at a few hundred messages
// per second.
const BinNs = 200_000_000

// fitRounds: each round removes the drift found so far before taking the
// bins' minima (a drift of 40 ppm moves θ by 8 µs within one bin) and fits
// what is left; three rounds converge to well under 0.01 ppm.
const fitRounds = 4

// fit estimates θ(t) = θ0 + k·(t − ref) from the observations.
func fit(xs []obs) (Estimate, error) {
	var e Estimate
	for _, o := range xs {
		if o.fwd {
			e.Forward++
		} else {
			e.Reverse++
		}
	}
	if e.Forward < minPerDir || e.Reverse < minPerDir {
		return e, fmt.Errorf("%w (%d A→B, %d B→A)", ErrNoSegments, e.Forward, e.Reverse)
	}
	e.RefNs = xs[0].t + (xs[len(xs)-1].t-xs[0].t)/2
	var k, theta, kErr float64
	var used []bin
	for range fitRounds {
		bins := binMinima(xs, e.RefNs, k)
		e.BinsTotal = len(bins)
		used = robust(bins)
		if len(used) < 2 {
			return e, fmt.Errorf("%w: %d time bins of %v ms with segments both ways", ErrNoSegments, len(used), BinNs/1e6)
		}
		var dk float64
		theta, dk, kErr = line(used)
		k += dk
	}
	e.OffsetNs, e.DriftPPM, e.DriftStdErrPPM, e.Bins = theta, k*1e6, kErr*1e6, len(used)
	e.UncertaintyNs = bound(xs, e.RefNs, k, theta)
	if e.UncertaintyNs < 0 {
		// Some segment arrived before another was sent even at the
		// fitted drift: the segments were matched or oriented wrongly.
		return e, fmt.Errorf("clocksync: the segments seen at both ends contradict any offset at the fitted drift of %.3f ppm (by %.0f ns): not one clock relation", e.DriftPPM, -e.UncertaintyNs)
	}
	rtts := make([]float64, len(used))
	for i, b := range used {
		rtts[i] = b.rtt
	}
	slices.Sort(rtts)
	e.MinRTTNs = rtts[len(rtts)/2]
	e.Warnings = []string{}
	if len(used) < 5 {
		e.Warnings = append(e.Warnings, fmt.Sprintf("only %d time bins with segments both ways: the drift is poorly known", len(used)))
	}
	return e, nil
}

// bin is one time bin's minimum-delay estimate: x is its middle relative
// to ref, theta the offset midway between the smallest forward and the
// largest reverse difference (drift removed), rtt their distance.
type bin struct {
	x, theta, rtt float64
}

// binMinima takes, per bin of BinNs, the forward observation with the
// smallest and the reverse one with the largest clock difference after
// removing the drift k: those had the least delay, and θ lies between
// them. Bins without both are skipped.
func binMinima(xs []obs, ref int64, k float64) []bin {
	var out []bin
	for i := 0; i < len(xs); {
		start := xs[i].t - (xs[i].t-xs[0].t)%BinNs
		lo, hi := math.Inf(1), math.Inf(-1)
		for ; i < len(xs) && xs[i].t < start+BinNs; i++ {
			r := float64(xs[i].d) - k*float64(xs[i].t-ref)
			if xs[i].fwd {
				lo = min(lo, r)
			} else {
				hi = max(hi, r)
			}
		}
		if !math.IsInf(lo, 0) && !math.IsInf(hi, 0) {
			out = append(out, bin{x: float64(start+BinNs/2-ref) / 1e9, theta: (lo + hi) / 2, rtt: lo - hi})
		}
	}
	return out
}

// robust drops bins whose offset is far from the median, by more than five
// median absolute deviations (and 1 µs): a bin where every segment one way
// was queued behind a burst has a minimum delay far above the others'.
func robust(bins []bin) []bin {
	if len(bins) < 3 {
		return bins
	}
	th := make([]float64, len(bins))
	for i, b := range bins {
		th[i] = b.theta
	}
	slices.Sort(th)
	med := th[len(th)/2]
	for i := range th {
		th[i] = math.Abs(th[i] - med)
	}
	slices.Sort(th)
	lim := max(5*th[len(th)/2], 1000)
	return slices.DeleteFunc(slices.Clone(bins), func(b bin) bool { return math.Abs(b.theta-med) > lim })
}

// line fits theta = a + s·x by least squares, x in seconds; it returns a,
// the slope per ns (s/1e9) and its standard error per ns.
func line(bins []bin) (a, slope, slopeErr float64) {
	n := float64(len(bins))
	var sx, sy float64
	for _, b := range bins {
		sx, sy = sx+b.x, sy+b.theta
	}
	mx, my := sx/n, sy/n
	var sxx, sxy float64
	for _, b := range bins {
		sxx += (b.x - mx) * (b.x - mx)
		sxy += (b.x - mx) * (b.theta - my)
	}
	if sxx == 0 {
		return my, 0, math.Inf(1)
	}
	s := sxy / sxx
	a = my - s*mx
	var rss float64
	for _, b := range bins {
		r := b.theta - a - s*b.x
		rss += r * r
	}
	if n > 2 {
		slopeErr = math.Sqrt(rss/(n-2)/sxx) / 1e9
	}
	return a, s / 1e9, slopeErr
}

// bound is how far θ(ref) can be from theta, given the drift k: causality
// puts it at most the smallest forward and at least the largest reverse
// (drift-corrected) clock difference.
func bound(xs []obs, ref int64, k, theta float64) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, o := range xs {
		r := float64(o.d) - k*float64(o.t-ref)
		if o.fwd {
			lo = min(lo, r)
		} else {
			hi = max(hi, r)
		}
	}
	return max(lo-theta, theta-hi)
}
