package analysis

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// FuzzReadE2E: rows written by recfile's writer read back through ReadE2E
// equal, in order, when every time is in (0, 2⁶²] and warmup is 0 or 1;
// a file with any other value is refused.
func FuzzReadE2E(f *testing.F) {
	f.Add(uint64(1), int64(100), int64(120), int64(900), true, uint8(0), 3)
	f.Add(uint64(1<<64-1), int64(1<<62), int64(1), int64(1), false, uint8(1), 1)
	f.Add(uint64(7), int64(0), int64(5), int64(6), true, uint8(0), 2)
	f.Add(uint64(7), int64(5), int64(5), int64(-6), true, uint8(0), 2)
	f.Add(uint64(7), int64(5), int64(1<<62+1), int64(6), true, uint8(0), 2)
	f.Add(uint64(7), int64(5), int64(6), int64(7), true, uint8(2), 2)
	f.Fuzz(func(t *testing.T, id uint64, intended, send, recv int64, received bool, warm uint8, n int) {
		n = 1 + n&7
		rows := make([]recfile.E2ERow, n)
		want := &E2E{}
		for k := range rows {
			r := recfile.E2ERow{ID: id + uint64(k), TIntended: intended, TSend: send, Warmup: warm}
			wantRecv := int64(0)
			if received && k != 1 { // the second row is never received
				r.TRecv = &recv
				wantRecv = recv
			}
			rows[k] = r
			want.IDs = append(want.IDs, r.ID)
			want.IntendedNs = append(want.IntendedNs, intended)
			want.SendNs = append(want.SendNs, send)
			want.RecvNs = append(want.RecvNs, wantRecv)
			want.Warmup = append(want.Warmup, warm == 1)
		}
		dir := t.TempDir()
		if err := recfile.WriteTable(testutil.OutDir(t, dir), "e2e.csv", rows); err != nil {
			t.Fatal(err)
		}
		got, err := ReadE2E(filepath.Join(dir, "e2e.csv"))
		inRange := func(v int64) bool { return v > 0 && v <= 1<<62 }
		valid := inRange(intended) && inRange(send) && (!received || inRange(recv)) && warm <= 1
		switch {
		case !valid && err == nil:
			t.Fatalf("accepted intended %d send %d recv %d (received %v) warmup %d", intended, send, recv, received, warm)
		case valid && err != nil:
			t.Fatalf("refused valid rows: %v", err)
		case valid && !(slices.Equal(got.IDs, want.IDs) && slices.Equal(got.IntendedNs, want.IntendedNs) &&
			slices.Equal(got.SendNs, want.SendNs) && slices.Equal(got.RecvNs, want.RecvNs) && slices.Equal(got.Warmup, want.Warmup)):
			t.Fatalf("read %+v, wrote %+v", got, want)
		}
	})
}
