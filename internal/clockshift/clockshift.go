// Package clockshift moves a recording to a host whose clock runs
// differently, for tests of what relates clocks: a known offset and drift
// that the code must recover.
package clockshift

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// Recording copies the recording in src to dst as if its host's
// CLOCK_MONOTONIC had run differently: M' = M + offset + drift·(M − t0),
// t0 its start (meta.json start_monotonic_ns). That host's realtime clock
// is its monotonic clock plus the measured mapping (meta.json clock), which
// stays as measured: a clock that runs fast runs fast for both. So every
// packet timestamp, realtime ts = M + R, becomes ts + offset + drift·(ts −
// R − t0), and start and end shift like any monotonic time; the mapping R
// is unchanged. What a clock estimate and a cluster join read is copied:
// meta.json (naming the shifted pcapng file, and giving the host the boot
// id bootID unless it is ""), that file, connections and the message rows'
// columns that a join reads, their times shifted, as CSV.
func Recording(t testing.TB, src, dst string, offset int64, drift float64, bootID string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	var meta recfile.Meta
	if err := recfile.ReadJSON(src, recfile.MetaFile, &meta); err != nil || meta.Clock == nil {
		t.Fatalf("%s: meta.json without a clock (%v)", src, err)
	}
	shift := func(mono int64) int64 { return mono + offset + int64(math.Round(drift*float64(mono-meta.StartNs))) }
	m := readMetaMap(t, src)
	capMeta := m["sources"].(map[string]any)["capture"].(map[string]any)["meta"].(map[string]any)
	pcap := filepath.Join(dst, "shifted.pcapng")
	rt := meta.Clock.StartNs
	shiftPcap(t, capMeta["pcap"].(string), pcap, func(ts int64) int64 { return shift(ts-rt) + rt })
	capMeta["pcap"] = pcap
	m["start_monotonic_ns"] = shift(meta.StartNs)
	m["end_monotonic_ns"] = shift(meta.EndNs)
	if bootID != "" {
		m["host"].(map[string]any)["boot_id"] = bootID
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dst, recfile.MetaFile), out, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	shiftMessages(t, src, dst, shift)
}

// readMetaMap reads meta.json as a tree, numbers kept as written.
func readMetaMap(t testing.TB, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, recfile.MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// shiftedRow holds the columns of messages.csv that a cluster join reads.
type shiftedRow struct {
	ID       uint64 `csv:"id"`
	TIn      int64  `csv:"t_in_ns"`
	TOut     int64  `csv:"t_out_ns"`
	InLPort  uint16 `csv:"in_lport"`
	InRPort  uint16 `csv:"in_rport"`
	OutLPort uint16 `csv:"out_lport"`
	OutRPort uint16 `csv:"out_rport"`
	Copy     uint32 `csv:"copy"`
}

// shiftMessages copies src's message rows (those columns) and connections
// to dst as CSV, the rows' times mapped by shift.
func shiftMessages(t testing.TB, src, dst string, shift func(int64) int64) {
	t.Helper()
	rows, err := recfile.ReadTable[shiftedRow](filepath.Join(src, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		rows[i].TIn, rows[i].TOut = shift(rows[i].TIn), shift(rows[i].TOut)
	}
	conns, err := recfile.ReadTable[recfile.ConnectionRow](filepath.Join(src, recfile.ConnectionsFile))
	if err != nil {
		t.Fatal(err)
	}
	d, err := outdir.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := recfile.WriteTable(d, recfile.MessagesFile, rows); err != nil {
		t.Fatal(err)
	}
	if err := recfile.WriteTable(d, recfile.ConnectionsFile, conns); err != nil {
		t.Fatal(err)
	}
}

// shiftPcap copies a pcapng file with every timestamp (ns) mapped by f.
func shiftPcap(t testing.TB, src, dst string, f func(int64) int64) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	rd, err := pcapgo.NewNgReader(in, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	type pkt struct {
		data []byte
		ci   gopacket.CaptureInfo
	}
	var pkts []pkt
	for {
		data, ci, err := rd.ReadPacketData()
		if err != nil {
			break
		}
		ci.Timestamp = time.Unix(0, f(ci.Timestamp.UnixNano()))
		pkts = append(pkts, pkt{data, ci})
	}
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	first, _ := rd.Interface(0)
	w, err := pcapgo.NewNgWriterInterface(out, first, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < rd.NInterfaces(); i++ {
		intf, _ := rd.Interface(i)
		if _, err := w.AddInterface(intf); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pkts {
		if err := w.WritePacket(p.ci, p.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}
