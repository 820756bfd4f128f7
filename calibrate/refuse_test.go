package calibrate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// editSweep rewrites the synthetic sweep's sweep.json through edit.
func editSweep(t *testing.T, dir string, edit func(*recfile.Sweep)) {
	t.Helper()
	var sw recfile.Sweep
	must(t, recfile.ReadJSON(dir, recfile.SweepFile, &sw))
	edit(&sw)
	must(t, recfile.WriteJSON(testutil.OutDir(t, dir), recfile.SweepFile, &sw, outdir.SecretPerm))
}

// refused checks that Run fails with ErrInput, on one line saying every
// part of want, and writes no calibration.json.
func refused(t *testing.T, dir string, opt Options, want ...string) {
	t.Helper()
	_, err := Run(dir, opt)
	if !errors.Is(err, ErrInput) {
		t.Fatalf("err = %v, want ErrInput", err)
	}
	for _, s := range want {
		if !strings.Contains(err.Error(), s) || strings.Contains(err.Error(), "\n") {
			t.Errorf("error %q does not say %q on one line", err, s)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, recfile.CalibrationFile)); err == nil {
		t.Error("calibration.json written despite the refusal")
	}
}

// TestCalibrateRefusesLossy: steps whose recordings lost markers or
// events are refused, by name, unless AllowLossy, which warns.
func TestCalibrateRefusesLossy(t *testing.T) {
	dir := t.TempDir()
	writeSynthSweep(t, dir)
	editSweep(t, dir, func(sw *recfile.Sweep) {
		sw.Steps[3].MarkersLost, sw.Steps[3].DroppedEvents = 59790, 9704
		sw.Steps[3].Losses = map[string]uint64{"probe.counters.dropped_markers": 59790, "probe.counters.dropped": 9700,
			"sources.sockq.meta.counters.missed": 4}
		sw.Steps[5].DroppedEvents = 3
		sw.Steps[5].Losses = map[string]uint64{"sources.sched.meta.probe.missed": 3}
	})
	refused(t, dir, Options{}, "step 3 (regular 6000 msg/s: 59790 markers lost, 9704 events dropped)",
		"step 5 (regular 10000 msg/s: 0 markers lost, 3 events dropped)", "--allow-lossy")
	cal, err := Run(dir, Options{AllowLossy: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := countWarnings(cal, "--allow-lossy: step "); n != 2 {
		t.Errorf("%d --allow-lossy warnings, want 2: %q", n, cal.Warnings)
	}
}

// TestCalibrateTakesArrivalLosses: a step whose only losses are the
// socket-queue source's (runs the kernel's recursion guard skipped) is
// used, with a warning naming it; one more loss anywhere else refuses it.
func TestCalibrateTakesArrivalLosses(t *testing.T) {
	dir := t.TempDir()
	writeSynthSweep(t, dir)
	editSweep(t, dir, func(sw *recfile.Sweep) {
		sw.Steps[4].DroppedEvents = 3
		sw.Steps[4].Losses = map[string]uint64{"sources.sockq.meta.counters.missed": 2, "sources.sockq.meta.counters.dropped": 1}
	})
	cal, err := Run(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := countWarnings(cal, "step 4 (regular 8000 msg/s): the socket-queue source lost 3 events or runs"); n != 1 {
		t.Errorf("warnings %q: want one for step 4's socket-queue losses", cal.Warnings)
	}
	must(t, os.Remove(filepath.Join(dir, recfile.CalibrationFile)))
	editSweep(t, dir, func(sw *recfile.Sweep) {
		sw.Steps[4].DroppedEvents = 4
		sw.Steps[4].Losses["sources.capture.meta.drops"] = 1
	})
	refused(t, dir, Options{}, "step 4 (regular 8000 msg/s: 0 markers lost, 4 events dropped)", "--allow-lossy")
	// A lossy step that does not list its counters says nothing of
	// where it lost: refused.
	editSweep(t, dir, func(sw *recfile.Sweep) { sw.Steps[4].Losses = nil })
	refused(t, dir, Options{}, "step 4 (regular 8000 msg/s: 0 markers lost, 4 events dropped)", "--allow-lossy")
}

// TestCalibrateRefusesUnsaturated: a sweep none of whose steps
// saturated has no peak; refused unless AllowUnsaturated, which warns.
func TestCalibrateRefusesUnsaturated(t *testing.T) {
	dir := t.TempDir()
	writeSynthSweep(t, dir)
	editSweep(t, dir, func(sw *recfile.Sweep) {
		for i := range sw.Steps {
			sw.Steps[i].Saturated = false
		}
	})
	refused(t, dir, Options{}, "no regular step saturated (the highest, step 5, asked 10000 msg/s and got 8000.0", "--allow-unsaturated")
	cal, err := Run(dir, Options{AllowUnsaturated: true})
	if err != nil {
		t.Fatal(err)
	}
	if countWarnings(cal, "--allow-unsaturated: ") != 1 {
		t.Errorf("warnings %q: want one saying the sweep never saturated", cal.Warnings)
	}
}

func countWarnings(cal *recfile.Calibration, prefix string) int {
	n := 0
	for _, w := range cal.Warnings {
		if strings.HasPrefix(w, prefix) {
			n++
		}
	}
	return n
}
