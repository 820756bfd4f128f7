package report

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// Written files for the tests that need exact, chosen data (bad input,
// clocks of two hosts, very long runs): the same formats record and load
// write, produced with their own writers where they have them.

// synthLoad writes dir/e2e.csv and dir/load.json: n messages, ids from
// idBase, sent every gapNs from startNs, each received lat(i) later.
func synthLoad(t *testing.T, dir string, idBase uint64, n int, startNs, gapNs int64, size int, lat func(i int) int64) {
	t.Helper()
	d := testutil.OutDir(t, dir)
	rows := make([]recfile.E2ERow, n)
	for i := range rows {
		send := startNs + int64(i)*gapNs
		recv := send + lat(i)
		rows[i] = recfile.E2ERow{ID: idBase + uint64(i), TIntended: send, TSend: send, TRecv: &recv}
	}
	if err := recfile.WriteTable(d, recfile.E2EFile, rows); err != nil {
		t.Fatal(err)
	}
	s := recfile.LoadSummary{Options: load.Config{Size: size, Rate: 1e9 / float64(gapNs), Pattern: "regular", Count: n}, Driver: "nats",
		StartNs: startNs, EndNs: startNs + int64(n)*gapNs + 1e9, FirstID: idBase, Planned: n, Sent: n, Received: n,
		AskedRate: 1e9 / float64(gapNs), AchievedRate: 1e9 / float64(gapNs)}
	data, _ := json.Marshal(s)
	if err := d.WriteFile("load.json", data, outdir.FilePerm); err != nil {
		t.Fatal(err)
	}
}

// synthRecord writes dir/messages.csv (with a ctxsw column) and
// dir/meta.json for messages read at tin[i] and written at tout[i].
func synthRecord(t *testing.T, dir string, ids []uint64, tin, tout []int64) {
	t.Helper()
	d := testutil.OutDir(t, dir)
	mw, err := recfile.CreateMessages(d, []string{"ctxsw"})
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := tin[0], tout[0]
	for i, id := range ids {
		m := recfile.Message{ID: id, TIn: tin[i], TOut: tout[i], Latency: tout[i] - tin[i], InTID: 7, OutTID: 7,
			InLPort: 4222, InRPort: 50000, OutLPort: 4222, OutRPort: 50001, Copy: 1}
		if err := mw.Write(&m, strconv.AppendUint([]byte{','}, m.ID%3, 10)); err != nil {
			t.Fatal(err)
		}
		lo, hi = min(lo, tin[i]), max(hi, tout[i])
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	meta := recfile.Meta{Tool: "brokertrace record", Host: recfile.Host{Hostname: "synth", Kernel: "6.18", Arch: "amd64", CPUs: 2},
		Target: recfile.Target{PID: 1, Comm: "broker"}, StartNs: lo - 1e6, EndNs: hi + 1e6, WindowNs: 1e8,
		Sources: map[string]recfile.SourceMeta{}, Rows: int64(len(ids)), Warnings: []string{}}
	if err := recfile.WriteJSON(d, recfile.MetaFile, meta, outdir.FilePerm); err != nil {
		t.Fatal(err)
	}
}
