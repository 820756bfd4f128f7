package recfile

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// Values agrees with the CSV line AppendRow writes for the same row: every
// numeric column under its header name, an empty field as NaN, strings
// left out.
func TestValuesMatchCSVRow(t *testing.T) {
	p := int64(-7)
	rows := []testRow{
		{A: -3, B: 65535, R: 0.25, S: "x,y", P: &p, F: 1e-9},
		{A: math.MaxInt32, B: 1, R: math.NaN(), S: "", P: nil, F: 12345.5},
	}
	for _, row := range rows {
		got := Values(&row)
		line := strings.TrimSuffix(string(AppendRow(nil, &row)), "\n")
		if row.S != "" { // the quoted string holds a comma: drop it first
			line = strings.Replace(line, `"x,y"`, "s", 1)
		}
		fields := strings.Split(line, ",")
		cols := Columns[testRow]()
		if len(got) != len(cols)-1 {
			t.Fatalf("%d values %v, want %d (all but the string)", len(got), got, len(cols)-1)
		}
		for i, c := range cols {
			if c == "s" {
				if _, ok := got[c]; ok {
					t.Errorf("string column %q in values", c)
				}
				continue
			}
			want := math.NaN()
			if fields[i] != "" {
				want, _ = strconv.ParseFloat(fields[i], 64)
			}
			v, ok := got[c]
			if !ok || (v != want && !(math.IsNaN(v) && math.IsNaN(want))) {
				t.Errorf("%s = %v (present %v), CSV field %q", c, v, ok, fields[i])
			}
		}
	}
}
