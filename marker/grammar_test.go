package marker

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// The grammar written down a second way, as regular expressions, so the
// scanner is checked against a truth it did not compute: a marker, and a
// proper prefix of one (what a stream must carry to the next piece).
var (
	markerRE  = regexp.MustCompile(`BTID[0-9a-f]{16}`)
	partialRE = regexp.MustCompile(`^B(T(I(D[0-9a-f]{0,15})?)?)?$`)
)

// reScan finds the markers of b with the regular expression. Markers cannot
// overlap ('B' is not a lowercase hex digit), so the leftmost matches are
// all of them.
func reScan(b []byte) []Found {
	var out []Found
	for _, m := range markerRE.FindAllIndex(b, -1) {
		id, err := strconv.ParseUint(string(b[m[0]+len(Prefix):m[1]]), 16, 64)
		if err != nil {
			panic(err)
		}
		out = append(out, Found{ID: id, End: m[1]})
	}
	return out
}

// streamSplit feeds b to a Stream in pieces cut at the given offsets.
func streamSplit(b []byte, cuts ...int) []Found {
	var s Stream
	var out []Found
	at := 0
	for _, c := range append(cuts, len(b)) {
		out = append(out, s.Write(b[at:c])...)
		at = c
	}
	return out
}

// TestEveryByteEveryPosition puts each of the 256 byte values at each of a
// marker's 20 positions, after a partial marker ("BT") and inside other
// bytes: Parse, Scan and a Stream cut at every offset find a marker exactly
// when the byte is the one the grammar allows there, and PrefixStart keeps
// exactly the partial markers of every prefix.
func TestEveryByteEveryPosition(t *testing.T) {
	const good = "BTID0123456789abcdef"
	for pos := 0; pos < Len; pos++ {
		for c := 0; c < 256; c++ {
			m := []byte(good)
			m[pos] = byte(c)
			b := slices.Concat([]byte("xBT"), m, []byte("y"))
			want := reScan(b)
			if id, ok := Parse(m); ok != (len(want) == 1) || ok && (id != want[0].ID || want[0].End != 3+Len) {
				t.Fatalf("Parse(%q) = %x, %v; the grammar says %v", m, id, ok, want)
			}
			if got := Scan(b); !slices.Equal(got, want) {
				t.Fatalf("Scan(%q) = %v, want %v", b, got, want)
			}
			for cut := 0; cut <= len(b); cut++ {
				if got := streamSplit(b, cut); !slices.Equal(got, want) {
					t.Fatalf("Stream of %q cut at %d: %v, want %v", b, cut, got, want)
				}
			}
			for k := 1; k <= len(b); k++ {
				if got, want := PrefixStart(b[:k]), prefixStart(b[:k]); got != want {
					t.Fatalf("PrefixStart(%q) = %d, want %d", b[:k], got, want)
				}
			}
		}
	}
}

// prefixStart is PrefixStart by the regular expression: the first offset
// whose suffix is a proper prefix of a marker.
func prefixStart(b []byte) int {
	for i := range b {
		if partialRE.Match(b[i:]) && len(b)-i < Len {
			return i
		}
	}
	return len(b)
}

// nearMisses returns a random stream over all 256 byte values dense with
// markers, most with one to three bytes replaced, often by a byte next to
// the ones the grammar allows.
func nearMisses(r *rand.Rand, n int) []byte {
	const close = "BTIDg`/:@GAFaf09BT\x00\xff"
	var b []byte
	for len(b) < n {
		for k := r.IntN(9); k > 0; k-- {
			b = append(b, byte(r.UintN(256)))
		}
		m := Append(nil, r.Uint64())
		for k := r.IntN(4); k > 0; k-- {
			c := byte(r.UintN(256))
			if r.IntN(2) == 0 {
				c = close[r.IntN(len(close))]
			}
			m[r.IntN(Len)] = c
		}
		b = append(b, m[:Len-r.IntN(2)*r.IntN(Len)]...)
	}
	return b
}

// TestNearMissStreams: Scan and a Stream cut at random offsets find exactly
// the markers the regular expression finds in streams of near misses.
func TestNearMissStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 2))
	total := 0
	for range 300 {
		b := nearMisses(r, 1+r.IntN(4000))
		want := reScan(b)
		total += len(want)
		if got := Scan(b); !slices.Equal(got, want) {
			t.Fatalf("Scan: %v, want %v in %q", got, want, b)
		}
		var cuts []int
		for c := r.IntN(30); c < len(b); c += 1 + r.IntN(40) {
			cuts = append(cuts, c)
		}
		if got := streamSplit(b, cuts...); !slices.Equal(got, want) {
			t.Fatalf("Stream cut at %v: %v, want %v in %q", cuts, got, want, b)
		}
	}
	if total < 4000 {
		t.Fatalf("only %d markers: the generator no longer plants enough", total)
	}
}
