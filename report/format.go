package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// fmtNs writes a time in ns in the unit that suits it: ns, µs and ms with
// three decimals (so µs show every ns), s likewise.
func fmtNs(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 0):
		return "∞"
	case a < 1e3:
		return strconv.FormatFloat(v, 'f', 0, 64) + " ns"
	case a < 1e6:
		return strconv.FormatFloat(v/1e3, 'f', 3, 64) + " µs"
	case a < 1e9:
		return strconv.FormatFloat(v/1e6, 'f', 3, 64) + " ms"
	default:
		return strconv.FormatFloat(v/1e9, 'f', 3, 64) + " s"
	}
}

// fmtDur writes a duration in ns shortly, without trailing zeros: 100 ms,
// 20 µs, 1.5 s.
func fmtDur(v float64) string {
	s := fmtNs(v)
	num, unit, ok := strings.Cut(s, " ")
	if !ok || !strings.Contains(num, ".") {
		return s
	}
	return strings.TrimRight(strings.TrimRight(num, "0"), ".") + " " + unit
}

// timeUnit is the unit a plot of ns values shows: the one that suits v
// (a typical value, e.g. the p99 of what is drawn).
type timeUnit struct {
	div  float64
	name string
}

func unitFor(v float64) timeUnit {
	switch a := math.Abs(v); {
	case a < 1e3 || math.IsNaN(a):
		return timeUnit{1, "ns"}
	case a < 1e6:
		return timeUnit{1e3, "µs"}
	case a < 1e9:
		return timeUnit{1e6, "ms"}
	default:
		return timeUnit{1e9, "s"}
	}
}

// gp is the gnuplot expression turning column col (ns) into the unit.
func (u timeUnit) gp(col int) string {
	if u.div == 1 {
		return fmt.Sprintf("($%d)", col)
	}
	return fmt.Sprintf("($%d/%g)", col, u.div)
}

// fmtRate writes messages per second.
func fmtRate(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 0):
		return "∞ msg/s"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 3, 64) + "M msg/s"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', 2, 64) + "k msg/s"
	default:
		return strconv.FormatFloat(v, 'f', 1, 64) + " msg/s"
	}
}

// fmtNum writes a plain quantity with up to digits decimals, without
// trailing zeros.
func fmtNum(v float64, digits int) string {
	if math.IsNaN(v) {
		return "–"
	}
	s := strconv.FormatFloat(v, 'f', digits, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// fmtCount writes an integer with thin-space thousands separators.
func fmtCount[T ~int | ~int64](n T) string {
	s := strconv.FormatInt(int64(n), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteRune(' ')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// fmtPct writes a p-value or share.
func fmtP(p float64) string {
	if math.IsNaN(p) {
		return "–"
	}
	if p < 0.001 {
		return strconv.FormatFloat(p, 'e', 1, 64)
	}
	return strconv.FormatFloat(p, 'f', 3, 64)
}

// tickLabel writes an axis value shortly: 2M, 500k, 0.25.
func tickLabel(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return fmtNum(v/1e9, 2) + "G"
	case a >= 1e6:
		return fmtNum(v/1e6, 2) + "M"
	case a >= 1e4:
		return fmtNum(v/1e3, 1) + "k"
	case a == 0:
		return "0"
	case a < 0.01:
		return strconv.FormatFloat(v, 'g', 2, 64)
	default:
		return fmtNum(v, 3)
	}
}
