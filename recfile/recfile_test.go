package recfile

import (
	"encoding/csv"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/outdir"
)

func TestMessagesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	mw, err := CreateMessages(testutil.OutDir(t, dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Message{
		{ID: 1<<63 + 1, TIn: 100, TOut: 250, Latency: 150, InTID: 3, OutTID: 4, InLPort: 4222, InRPort: 5000, OutLPort: 4222, OutRPort: 5001, Copy: 1},
		{ID: 2, TIn: 5, TOut: 6, Latency: 1, Copy: 2},
	}
	for i := range want {
		if err := mw.Write(&want[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMessages(filepath.Join(dir, MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestEmptyMessagesHasHeader(t *testing.T) {
	dir := t.TempDir()
	mw, _ := CreateMessages(testutil.OutDir(t, dir), nil)
	mw.Close()
	b, _ := os.ReadFile(filepath.Join(dir, MessagesFile))
	if string(b) != "id,t_in_ns,t_out_ns,latency_ns,in_tid,out_tid,in_lport,in_rport,out_lport,out_rport,copy,in_seq,out_seq\n" {
		t.Fatalf("%q", b)
	}
	if m, err := ReadMessages(filepath.Join(dir, MessagesFile)); err != nil || len(m) != 0 {
		t.Fatal(m, err)
	}
}

func TestCreateMessagesUnwritable(t *testing.T) {
	if _, err := outdir.Open("/proc/version"); err == nil {
		t.Fatal("no error for an unwritable directory")
	}
}

// FuzzReadMessages: a file either is refused, or every number it reads is
// the number the text says, exactly: read as an arbitrary-precision
// integer from the same field, not through the column's type, so a value
// that does not fit (a port of 70000, a copy of 2³²+1) cannot come back
// truncated. Rows also keep latency_ns = t_out_ns − t_in_ns.
func FuzzReadMessages(f *testing.F) {
	f.Add("id,t_in_ns,t_out_ns,latency_ns,in_tid,out_tid,in_lport,in_rport,out_lport,out_rport,copy\n1,2,3,1,4,5,6,7,8,9,1\n")
	f.Add("id,t_in_ns,t_out_ns,latency_ns,in_tid,out_tid,in_lport,in_rport,out_lport,out_rport,copy\n1,2,3,1,4,5,70000,7,8,9,1\n")
	f.Add("id,t_in_ns,t_out_ns,latency_ns,in_tid,out_tid,in_lport,in_rport,out_lport,out_rport,copy\n1,2,3,1,4,5,6,7,8,9,4294967297\n")
	f.Add("copy,out_rport,out_lport,in_rport,in_lport,out_tid,in_tid,latency_ns,t_out_ns,t_in_ns,id,extra\n1,2,3,4,5,6,7,-1,-5,-4,18446744073709551615,x\n")
	f.Add("id\n1\n")
	f.Add("id,t_in_ns,t_out_ns,latency_ns,in_tid,out_tid,in_lport,in_rport,out_lport,out_rport,copy,in_seq,out_seq\n1,2,3,1,4,5,6,7,8,9,1,4294967295,4294967296\n")
	f.Fuzz(func(t *testing.T, s string) {
		p := filepath.Join(t.TempDir(), "m.csv")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		rows, err := ReadMessages(p)
		if err != nil {
			return
		}
		recs, err := csv.NewReader(strings.NewReader(s)).ReadAll()
		if err != nil || len(recs) != len(rows)+1 {
			t.Fatalf("accepted %d rows of a file encoding/csv reads as %d records (%v)", len(rows), len(recs), err)
		}
		at := map[string]int{}
		for i, h := range recs[0] {
			at[h] = i
		}
		for i, r := range rows {
			if r.Latency != r.TOut-r.TIn {
				t.Fatalf("row %+v: latency_ns disagrees with the times", r)
			}
			got := []any{r.ID, r.TIn, r.TOut, r.Latency, r.InTID, r.OutTID, r.InLPort, r.InRPort, r.OutLPort, r.OutRPort, r.Copy, r.InSeq, r.OutSeq}
			for j, col := range MessageColumns {
				k, ok := at[col]
				if !ok { // an optional column the file lacks: read as 0
					if fmt.Sprint(got[j]) != "0" {
						t.Fatalf("row %d: column %s absent, read as %v", i+1, col, got[j])
					}
					continue
				}
				text := recs[i+1][k]
				want, ok := new(big.Int).SetString(text, 10)
				if !ok || fmt.Sprint(got[j]) != want.String() {
					t.Fatalf("row %d column %s: %q read as %v", i+1, col, text, got[j])
				}
			}
		}
	})
}

// FuzzMessagesRoundTrip: rows written by MessageWriter, with the sources'
// columns after them, read back equal.
func FuzzMessagesRoundTrip(f *testing.F) {
	f.Add(uint64(1<<63+1), int64(100), int64(150), uint32(3), uint32(4), uint16(4222), uint16(5000), uint16(4222), uint16(5001), uint32(1), 3)
	f.Add(uint64(1<<64-1), int64(-1<<62), int64(1<<62), uint32(1<<32-1), uint32(0), uint16(65535), uint16(0), uint16(1), uint16(65535), uint32(1<<32-1), 1)
	f.Fuzz(func(t *testing.T, id uint64, tIn, lat int64, inTID, outTID uint32, il, ir, ol, or uint16, cp uint32, n int) {
		n = 1 + n&7
		dir := t.TempDir()
		mw, err := CreateMessages(testutil.OutDir(t, dir), []string{"ctxsw", "note"})
		if err != nil {
			t.Fatal(err)
		}
		var want []Message
		for k := range n {
			m := Message{ID: id + uint64(k), TIn: tIn, TOut: tIn + lat, Latency: lat, InTID: inTID, OutTID: outTID,
				InLPort: il, InRPort: ir, OutLPort: ol, OutRPort: or, Copy: cp + uint32(k)}
			want = append(want, m)
			if err := mw.Write(&m, fmt.Appendf(nil, ",%d,\"a,b\"", k)); err != nil {
				t.Fatal(err)
			}
		}
		if err := mw.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := ReadMessages(filepath.Join(dir, MessagesFile))
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("read back %+v (%v)\nwrote %+v", got, err, want)
		}
	})
}
