package marker

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, id := range []uint64{0, 1, 0xdeadbeef, 1<<63 + 5, ^uint64(0)} {
		m := Append(nil, id)
		if len(m) != Len {
			t.Fatalf("len %d", len(m))
		}
		b := make([]byte, Len)
		Put(b, id)
		if !bytes.Equal(b, m) {
			t.Fatalf("Put %q != Append %q", b, m)
		}
		got, ok := Parse(m)
		if !ok || got != id {
			t.Fatalf("Parse(%q) = %d,%v want %d", m, got, ok, id)
		}
	}
	if String(0x0123456789abcdef) != "BTID0123456789abcdef" {
		t.Fatal(String(0x0123456789abcdef))
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{"", "BTID", "BTID0123456789abcde", "BTID0123456789abcdeF", "btid0123456789abcdef", "BTIX0123456789abcdef", "BTID 123456789abcdef"} {
		if _, ok := Parse([]byte(s)); ok {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
}

func TestScanMany(t *testing.T) {
	var b []byte
	for i := uint64(0); i < 150; i++ {
		b = append(b, "PUB x 30\r\nBB"...)
		b = Append(b, i*7919)
		b = append(b, "BTIDzz\r\n"...)
	}
	f := Scan(b)
	if len(f) != 150 {
		t.Fatalf("found %d", len(f))
	}
	for i, x := range f {
		if x.ID != uint64(i)*7919 {
			t.Fatalf("#%d id %d", i, x.ID)
		}
		if string(b[x.End-Len:x.End]) != String(x.ID) {
			t.Fatalf("End wrong")
		}
	}
}

func TestPrefixStart(t *testing.T) {
	cases := map[string]int{
		"":                       0,
		"abc":                    3,
		"xxB":                    2,
		"xxBT":                   2,
		"xxBTID01":               2,
		"xxBTIX":                 6,
		"BTID0123456789abcde":    0,
		"xBTID0123456789abcde":   1,
		"BTID0123456789abcdef":   20, // complete, nothing to carry
		"xxBTID0123456789abcdeB": 21,
	}
	for in, want := range cases {
		if got := PrefixStart([]byte(in)); got != want {
			t.Errorf("PrefixStart(%q) = %d want %d", in, got, want)
		}
	}
}

// TestStreamSplits cuts a stream of markers at every position and checks that
// the stream scanner finds exactly the markers of the whole.
func TestStreamSplits(t *testing.T) {
	var whole []byte
	for i := uint64(1); i <= 5; i++ {
		whole = append(whole, "..B.BT"...)
		whole = Append(whole, i<<40|i)
	}
	want := Scan(whole)
	for cut := 0; cut <= len(whole); cut++ {
		for cut2 := cut; cut2 <= len(whole); cut2 += 7 {
			var s Stream
			got := s.Write(whole[:cut])
			got = append(got, s.Write(whole[cut:cut2])...)
			got = append(got, s.Write(whole[cut2:])...)
			if len(got) != len(want) {
				t.Fatalf("cut %d/%d: %d markers, want %d", cut, cut2, len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("cut %d/%d: %+v want %+v", cut, cut2, got[i], want[i])
				}
			}
		}
	}
}

func FuzzScan(f *testing.F) {
	f.Add([]byte("xxBTID0123456789abcdefyy"), uint16(3))
	f.Add([]byte("BTIDBTID0123456789abcdef0"), uint16(10))
	f.Add([]byte("BTID0123456789abcdegBTIE0123456789abcdefBTBTID0123456789abcdef"), uint16(44))
	f.Add([]byte("BTID0123456789ABCDEF:BID0123456789abcdef`BTID0123456789abcde/"), uint16(19))
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		found := Scan(b)
		for _, x := range found {
			if x.End < Len || x.End > len(b) || string(b[x.End-Len:x.End]) != String(x.ID) {
				t.Fatalf("bad find %+v in %q", x, b)
			}
		}
		// The same markers, ids and offsets as the regular expression.
		if want := reScan(b); !slices.Equal(found, want) {
			t.Fatalf("Scan %v, regular expression %v", found, want)
		}
		c := int(cut) % (len(b) + 1)
		var s Stream
		got := append(s.Write(b[:c]), s.Write(b[c:])...)
		if len(got) != len(found) {
			t.Fatalf("split at %d: %d markers, whole %d", c, len(got), len(found))
		}
		for i := range got {
			if got[i] != found[i] {
				t.Fatalf("split at %d: %+v != %+v", c, got[i], found[i])
			}
		}
	})
}

func BenchmarkScan(b *testing.B) {
	buf := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range buf {
		buf[i] = byte(r.UintN(256))
	}
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		Scan(buf)
	}
}
