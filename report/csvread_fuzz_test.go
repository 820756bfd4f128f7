package report

import (
	"bytes"
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseField: a number written in any of strconv's forms, with
// spaces around it, reads back as exactly that number; an empty field is
// NaN (unknown); Inf and NaN written out are refused, as is text.
func FuzzParseField(f *testing.F) {
	f.Add(1.5, byte('g'), uint8(0), "")
	f.Add(-1e-300, byte('e'), uint8(2), "")
	f.Add(123456789.0, byte('f'), uint8(1), "x")
	f.Add(math.Inf(1), byte('g'), uint8(0), "")
	f.Add(0.0, byte('g'), uint8(0), "NaN")
	f.Fuzz(func(t *testing.T, x float64, format byte, spaces uint8, junk string) {
		if !strings.ContainsRune("eEfgG", rune(format)) {
			format = 'g'
		}
		pad := strings.Repeat(" ", int(spaces%3))
		s := pad + strconv.FormatFloat(x, format, -1, 64) + pad + junk
		got, err := parseField(s)
		_, junkErr := strconv.ParseFloat(strings.TrimSpace(strconv.FormatFloat(x, format, -1, 64)+pad+junk), 64)
		finite := !math.IsInf(x, 0) && !math.IsNaN(x)
		switch {
		case finite && junk == "":
			if err != nil || got != x {
				t.Fatalf("%q: %v (%v), want %v", s, got, err, x)
			}
		case !finite || junkErr != nil:
			if err == nil {
				t.Fatalf("%q accepted as %v", s, got)
			}
		}
		if v, err := parseField(""); err != nil || !math.IsNaN(v) {
			t.Fatalf("empty field: %v %v", v, err)
		}
	})
}

// FuzzScanCSV: records written by encoding/csv's Writer (quotes, commas,
// line breaks in fields) reach fn whole, in order, each with the line it
// starts on, counted from the text written; a header-only file gives no
// record.
func FuzzScanCSV(f *testing.F) {
	f.Add("a,b\n1,2\n3,4")
	f.Add("x\n\"multi\nline\",1\nlast,2")
	f.Add("")
	f.Fuzz(func(t *testing.T, spec string) {
		if strings.ContainsRune(spec, '\r') {
			return // encoding/csv drops a \r before \n inside quotes
		}
		var recs [][]string
		for _, line := range strings.Split(spec, "\x00") {
			recs = append(recs, []string{line, strconv.Itoa(len(recs))})
		}
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		if err := w.WriteAll(recs); err != nil {
			return // not valid UTF-8 or a field encoding/csv cannot write
		}
		starts := []int{1}
		for _, r := range recs {
			var one bytes.Buffer
			cw := csv.NewWriter(&one)
			cw.Write(r)
			cw.Flush()
			starts = append(starts, starts[len(starts)-1]+strings.Count(one.String(), "\n"))
		}
		p := filepath.Join(t.TempDir(), "x.csv")
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		var hdr []string
		n := 0
		err := scanCSV(p, func(h []string) error { hdr = slices.Clone(h); return nil }, func(line int, rec []string) error {
			n++
			if !slices.Equal(rec, recs[n]) || line != starts[n] {
				t.Fatalf("record %d at line %d: %q, wrote %q at line %d", n, line, rec, recs[n], starts[n])
			}
			return nil
		})
		if err != nil || !slices.Equal(hdr, recs[0]) || n != len(recs)-1 {
			t.Fatalf("header %q, %d records, %v; wrote %q", hdr, n, err, recs)
		}
	})
}
