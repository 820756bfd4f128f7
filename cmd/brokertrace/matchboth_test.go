package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestMatchBoth: record --match both matches by marker and checks every
// copy against matching by frame in the same recording. Beside it, a
// second recording matches by frame alone, and the test's own comparison
// of the two recordings (compareRecordings, sameRight) must find what the
// check found: every copy the load sent, matched alike, the load's
// subscription probes as the only copies without a marker. The cases put
// the marker last in the payload (json), in a header (same) and first
// (fixed, MQTT: no second recording, the test's comparison needs one of
// the others).
func TestMatchBoth(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	srv := testbroker.StartNATS(t)
	mq := testbroker.StartMosquitto(t)
	for _, c := range []struct {
		b     broker
		frame bool // record by frame beside it, and compare
		a     agreement
	}{
		{natsBroker(srv, agreement{Payload: load.PayloadJSON}), true, agreement{Rate: 20000, Fanout: 3, Payload: load.PayloadJSON, Sent: 40000}},
		{natsBroker(srv, agreement{Payload: load.PayloadSame}), true, agreement{Rate: 0, Fanout: 1, Payload: load.PayloadSame, Sent: 50000}},
		{broker{name: "mosquitto", url: mq.URL() + "/bt/both", pid: mq.PID()}, false, agreement{Rate: 20000, Fanout: 1, Payload: load.PayloadFixed, Sent: 40000}},
	} {
		t.Run(c.b.name+"-"+c.a.Payload, func(t *testing.T) {
			modes := []string{"both"}
			if c.frame {
				modes = append(modes, "frame")
			}
			dirs := recordModes(t, c.b, c.a, modes...)
			chk := readCheck(t, dirs["both"])
			t.Logf("%d copies: %d matched alike (%d in other calls), %d otherwise, %d not found, %d without a marker; largest Δt %d ns",
				chk.Copies, chk.Matched, chk.OtherCalls, chk.Differs, chk.MarkerOnly, chk.FrameOnly, chk.MaxDtNs)
			copies := c.a.Sent * c.a.Fanout
			rows, err := recfile.ReadTable[recfile.MatchCheckRow](filepath.Join(dirs["both"], recfile.MatchCheckFile))
			if err != nil {
				t.Fatal(err)
			}
			if chk.Copies != uint64(copies) || chk.Matched != chk.Copies || chk.Differs+chk.MarkerOnly != 0 ||
				chk.FrameOnly < uint64(c.a.Fanout) || chk.FrameOnly > 20*uint64(c.a.Fanout) || len(rows) != int(chk.FrameOnly) ||
				chk.Frame.DuplicateIn+chk.Frame.OutWithoutIn != 0 || chk.FrameProbe.Frame == nil || chk.FrameProbe.DroppedEvents != 0 {
				t.Fatalf("check %+v with %d rows in %s: want all %d copies matched alike", chk, len(rows), recfile.MatchCheckFile, copies)
			}
			for _, r := range rows {
				if r.Kind != recfile.CheckFrameOnly {
					t.Fatalf("row %+v", r)
				}
			}
			// Identical payloads: the frame matcher chose among several
			// reads in flight, first in, first out, and chose right.
			if same := c.a.Payload == load.PayloadSame; same != (chk.Frame.Ambiguous > 0) {
				t.Errorf("payload %s: %d copies ambiguous", c.a.Payload, chk.Frame.Ambiguous)
			}
			if !c.frame {
				return
			}
			// The test's comparison of the check's marker rows with the
			// frame recording's.
			var matched, other int
			if c.a.Payload == load.PayloadSame {
				matched, other = sameRight(t, dirs["both"], dirs["frame"])
			} else {
				a := compareRecordings(t, dirs["both"], dirs["frame"])
				matched, other = a.Matched, a.Extra
			}
			if matched != int(chk.Matched) || other != int(chk.FrameOnly) {
				t.Fatalf("the recordings by marker and by frame: %d matched, %d without a marker; the check: %d, %d", matched, other, chk.Matched, chk.FrameOnly)
			}
		})
	}
}

// readCheck reads the match check of the recording in dir.
func readCheck(t *testing.T, dir string) recfile.MatchCheck {
	t.Helper()
	var meta recfile.Meta
	if err := recfile.ReadJSON(dir, recfile.MetaFile, &meta); err != nil {
		t.Fatal(err)
	}
	var chk recfile.MatchCheck
	raw, _ := json.Marshal(meta.Sources["match_check"].Meta)
	if err := json.Unmarshal(raw, &chk); err != nil || meta.Probe.Match != "both" || meta.Messages.Copies != chk.Copies {
		t.Fatalf("meta.json: match %q, %d copies, check %s (%v)", meta.Probe.Match, meta.Messages.Copies, raw, err)
	}
	return chk
}
