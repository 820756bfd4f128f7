package analysis

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// The .dat writers produce what gnuplot reads without options: one line per
// point, whitespace-separated columns, and a first line starting with '#'
// that names the columns with their units. Infinite and undefined values
// are written as inf and nan (gnuplot skips them); integers are written
// exactly.

// WriteSeriesDat writes a per-message series: columns n (the message's
// number; first is the number of xs[0], e.g. M for an overhead series) and
// the value, named name (give the unit in it, e.g. "latency_ns").
func WriteSeriesDat[T Number](w io.Writer, name string, first int, xs []T) error {
	if err := checkName(name); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(bw, "# n %s\n", name)
	var b []byte
	for i, x := range xs {
		b = strconv.AppendInt(b[:0], int64(first+i), 10)
		b = append(b, ' ')
		b = appendNumber(b, x)
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteColumnsDat writes equally long columns side by side, e.g. n, ST_n
// and RT_n to plot both throughputs into one graph as the seed suggests.
func WriteColumnsDat(w io.Writer, names []string, cols ...[]float64) error {
	if len(names) != len(cols) {
		return fmt.Errorf("%d column names for %d columns: name each column", len(names), len(cols))
	}
	for i, c := range cols {
		if len(c) != len(cols[0]) {
			return fmt.Errorf("column %s has %d values, column %s %d: give columns of equal length", names[i], len(c), names[0], len(cols[0]))
		}
		if err := checkName(names[i]); err != nil {
			return err
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(bw, "# %s\n", strings.Join(names, " "))
	if len(cols) == 0 {
		return bw.Flush()
	}
	var b []byte
	for r := range cols[0] {
		b = b[:0]
		for i, c := range cols {
			if i > 0 {
				b = append(b, ' ')
			}
			b = appendNumber(b, c[r])
		}
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteHistogramDat writes histogram bins: the bin's centre (for gnuplot's
// "with boxes"), its lower and upper edge, and its count. name is the
// value's name with its unit, e.g. "latency_ns".
func WriteHistogramDat(w io.Writer, name string, bins []Bin) error {
	if err := checkName(name); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(bw, "# %[1]s_center %[1]s_lower %[1]s_upper count\n", name)
	var b []byte
	for _, bin := range bins {
		b = appendNumber(b[:0], (bin.Lower+bin.Upper)/2)
		b = append(b, ' ')
		b = appendNumber(b, bin.Lower)
		b = append(b, ' ')
		b = appendNumber(b, bin.Upper)
		b = append(b, ' ')
		b = strconv.AppendInt(b, bin.Count, 10)
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func checkName(name string) error {
	if name == "" || strings.ContainsAny(name, " \t\n\r#\"") {
		return fmt.Errorf("column name %q is empty or has blanks, '#' or quotes: use a word like latency_ns", name)
	}
	return nil
}

func appendNumber[T Number](b []byte, x T) []byte {
	v := float64(x)
	switch {
	case math.IsNaN(v):
		return append(b, "nan"...)
	case math.IsInf(v, 1):
		return append(b, "inf"...)
	case math.IsInf(v, -1):
		return append(b, "-inf"...)
	}
	if T(1)/2 == 0 { // an integer type
		return strconv.AppendInt(b, int64(x), 10)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// quoteLabel makes a string one gnuplot column: double-quoted, with the
// characters that would end it replaced.
func quoteLabel(s string) string {
	return `"` + strings.NewReplacer(`"`, "'", "\n", " ", "\r", " ").Replace(s) + `"`
}
