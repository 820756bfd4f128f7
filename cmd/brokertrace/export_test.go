package main

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/recfile"
)

// exportCalibration writes a calibration made by hand: stages summing to
// 125 µs (a shared CPU saturates at 8000 msg/s), steps at 1000, 5000 and
// 9000 msg/s regular (the last saturated), 5000 bursty, and 8000 regular:
// achieved by the sweep, but the model's own saturation.
func exportCalibration(t *testing.T, params ...recfile.CalParam) string {
	dir := t.TempDir()
	cal := recfile.Calibration{Sweep: "sweep1", Broker: "activemq", CPUs: 1, Params: params,
		Stages: []recfile.CalStage{
			{Name: "accept-msg", MeanNs: 40000, DemandFile: "demand_accept-msg.txt"},
			{Name: "process", MeanNs: 25000},
			{Name: "dispatch", MeanNs: 40000},
			{Name: "system", MeanNs: 20000},
		},
		Steps: []recfile.SweepStep{
			{Index: 0, Pattern: "regular", RateAsked: 1000, Status: "done"},
			{Index: 1, Pattern: "regular", RateAsked: 5000, Status: "done"},
			{Index: 2, Pattern: "regular", RateAsked: 9000, Status: "done", Saturated: true},
			{Index: 3, Pattern: "bursty", Burst: 10, RateAsked: 5000, Status: "done"},
			// kept up with by the sweep, but at the model's saturation
			{Index: 4, Pattern: "regular", RateAsked: 8000, Status: "done"},
		}}
	data, _ := json.Marshal(cal)
	if err := os.WriteFile(filepath.Join(dir, recfile.CalibrationFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "demand_accept-msg.txt"), []byte("30000\n35000\n40000\n45000\n50000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// exportJSON runs export on the calibration in dir and returns what it
// printed with --json.
func exportJSON(t *testing.T, dir string) exportResult {
	t.Helper()
	out, err := exec.Command(binary, "export", dir, "--json").Output()
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	var res exportResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	return res
}

func TestExport(t *testing.T) {
	dir := exportCalibration(t)
	res := exportJSON(t, dir)
	// The highest rate below saturation (the sweep's and the model's), its
	// regular step over the bursty one.
	if res.Rate != 5000 || res.Pattern != "regular" || !strings.Contains(res.RateFrom, "step 1") {
		t.Errorf("rate %v %s from %q, want 5000 regular from step 1", res.Rate, res.Pattern, res.RateFrom)
	}
	if !slices.Equal(res.WhatIf, []float64{1000, 5000, 8000, 9000}) {
		t.Errorf("what-if rates %v", res.WhatIf)
	}
	var names []string
	for _, p := range res.Files {
		if filepath.Dir(p) != dir {
			t.Errorf("%s written outside the calibration's directory", p)
		}
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
		names = append(names, filepath.Base(p))
	}
	slices.Sort(names)
	want := []string{"model-accept-msg-pdf.txt", "model-constant-pdf.txt", "model.jmva", "model.lqnx", "model.qpe"}
	if !slices.Equal(names, want) {
		t.Errorf("files %v, want %v", names, want)
	}
	// 8000 and 9000 msg/s are at or past the shared CPU's 8000: JMVA's
	// what-if leaves them out, and says so.
	if len(res.Warnings) != 2 || !strings.Contains(res.Warnings[0], "8000 msg/s left out") || !strings.Contains(res.Warnings[1], "9000 msg/s left out") {
		t.Errorf("warnings %q", res.Warnings)
	}
	qpe, _ := os.ReadFile(filepath.Join(dir, "model.qpe"))
	if !strings.Contains(string(qpe), `pdf_filename="model-accept-msg-pdf.txt"`) || !strings.Contains(string(qpe), `offset="0.0002"`) {
		t.Errorf("model.qpe lacks accept-msg's Empirical demand or the regular 1/5000 s arrivals")
	}
}

// TestExportBackground: a background of 0.5 CPU (the idle step's) adds
// 0.5 s / rate per message as a stage: with the stages' 125 µs the model
// saturates at (1 − 0.5) / 125 µs = 4000 msg/s, so the rate exported is
// the 1000 msg/s step's, not the 5000's, with a background stage of
// 500 µs per message; its stated utilisation is 1000 × 625 µs.
func TestExportBackground(t *testing.T) {
	dir := exportCalibration(t, recfile.CalParam{Name: recfile.CalBackground, Value: 0.5, Unit: "CPUs", Source: "sweep idle step"})
	res := exportJSON(t, dir)
	if res.Rate != 1000 || !strings.Contains(res.RateFrom, "step 0") || math.Abs(res.BrokerUtil-0.625) > 1e-9 {
		t.Errorf("rate %v from %q, stated utilisation %v: want 1000 from step 0, 0.625", res.Rate, res.RateFrom, res.BrokerUtil)
	}
	jm, _ := os.ReadFile(filepath.Join(dir, "model.jmva"))
	if !strings.Contains(string(jm), "background") {
		t.Errorf("model.jmva has no background stage")
	}
}

func TestExportBadInput(t *testing.T) {
	dir := exportCalibration(t)
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"export", dir, "--format", "qpn"}, exitUsage, "--format"},
		{[]string{"export", filepath.Join(dir, "nosuch.json")}, exitUsage, "reading the calibration"},
		{[]string{"export", dir, "--format", "jmva", "--rate", "9000"}, exitUsage, "saturation"},
		{[]string{"export"}, exitUsage, "give one calibration"},
	} {
		cmd := exec.Command(binary, tc.args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != tc.code || !strings.Contains(stderr.String(), tc.says) {
			t.Errorf("%v: exit %v, stderr %q; want exit %d saying %q", tc.args, err, stderr.String(), tc.code, tc.says)
		}
	}
}
