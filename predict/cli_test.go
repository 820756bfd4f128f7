package predict

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/recfile"
)

// The command as a user runs it: the built binary on a synthetic
// calibration; its table, files, --json and exit codes.
func TestPredictCommand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "brokertrace")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/brokertrace").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cal := synthCal(t, true, 2000)
	out := filepath.Join(t.TempDir(), "pred")
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, append([]string{"predict"}, args...)...)
		b, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(b) + string(ee.Stderr), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b), 0
	}
	text, code := run("--messages", "5000", "--out", out, cal)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	// step 0: predicted 54 µs against the measured 27 µs
	for _, s := range []string{"54.0µs", "27.0µs", "2.00×", "+0.4", "goal median_latency_within_1.5x: NOT met", "goal p99_latency_within_3x: met", "goal saturation_within_5pct"} {
		if !strings.Contains(text, s) {
			t.Errorf("output lacks %q:\n%s", s, text)
		}
	}
	for _, f := range []string{recfile.PredictionFile, "prediction.html", "plots/predict_util_regular.gp"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	js, code := run("--json", "--no-report", "--rates", "1000", "--pattern", "regular", "--messages", "2000", "--out", out, filepath.Dir(cal))
	var p recfile.Prediction
	if err := json.Unmarshal([]byte(js), &p); err != nil || code != 0 {
		t.Fatalf("--json: exit %d, %v:\n%s", code, err, js)
	}
	if len(p.Rows) != 1 || p.Rows[0].Predicted.Latency.P50Ns != 54000 || p.Rows[0].Errors == nil || p.Rows[0].Errors.MedianRatio != 2 {
		t.Errorf("--json rows %+v", p.Rows)
	}
	for _, bad := range [][]string{
		{"--pattern", "poisson", cal},
		{"--demand", "gamma", cal},
		{"--rates", "0", cal},
		{filepath.Join(t.TempDir(), "none.json")},
		{},
	} {
		if msg, code := run(bad...); code != 2 {
			t.Errorf("predict %q: exit %d, want 2:\n%s", bad, code, msg)
		}
	}
}
