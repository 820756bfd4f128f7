package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/brokertrace/brokertrace/recfile"
)

// TestSweepEndLosses: the sweep's last lines name the steps calibrate
// refuses (a lost marker, a dropped event) apart from those whose only
// losses are the socket-queue source's, which it uses with a warning.
func TestSweepEndLosses(t *testing.T) {
	done := recfile.SweepDone
	sw := &recfile.Sweep{Steps: []recfile.SweepStep{
		{Index: 0, Status: done},
		{Index: 1, Status: done, MarkersLost: 5, DroppedEvents: 2,
			Losses: map[string]uint64{"probe.counters.dropped_markers": 5, "sources.sockq.meta.counters.missed": 2}},
		{Index: 2, Status: done, DroppedEvents: 3,
			Losses: map[string]uint64{"sources.sockq.meta.counters.missed": 2, "sources.sockq.meta.counters.dropped": 1}},
	}}
	var b bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetErr(&b)
	sweepEnd(cmd, sw)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "steps 1 (5 markers lost, 2 events dropped) lost events: calibrate refuses them") ||
		!strings.Contains(lines[1], "the socket-queue source of steps 2 (3) lost events or runs, nothing else") {
		t.Fatalf("sweep's last lines:\n%s", b.String())
	}
}
