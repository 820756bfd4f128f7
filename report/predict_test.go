package report

import (
	"html"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

func predictTestPrediction() *recfile.Prediction {
	bins := []recfile.PredictionBin{{LoNs: 10e3, HiNs: 11.22e3, Count: 30}, {LoNs: 11.22e3, HiNs: 12.59e3, Count: 10}, {LoNs: 19.95e3, HiNs: 22.39e3, Count: 60}}
	return &recfile.Prediction{Calibration: "x/calibration.json", Sweep: "x", SweepFound: true,
		Options: recfile.PredictionOptions{Pattern: "as-measured", Messages: 100, Demand: "empirical"},
		Model:   recfile.PredictionModel{CPUs: 1, Stages: []recfile.PredictionStage{{Name: "accept-msg", Demand: "empirical", MeanNs: 12e3, Samples: 40}}},
		Rows: []recfile.PredictionRow{
			{Rate: 1000, Pattern: "regular", Step: 0,
				Predicted: recfile.PredictionValues{Throughput: 999, BrokerUtil: 0.53, Latency: recfile.LatencyStats{Count: 100, P50Ns: 20e3, P99Ns: 40e3}, LatencyBins: bins},
				Measured:  &recfile.PredictionValues{Throughput: 1000, BrokerUtil: 0.6, JITUtil: 0.1, Latency: recfile.LatencyStats{P50Ns: 10e3, P99Ns: 80e3}, LatencyBins: bins[:2]},
				Errors:    &recfile.PredictionErrors{ThroughputPct: -0.1, BrokerUtilPP: 3, MedianRatio: 2, P99Ratio: 0.5, UtilChecked: true, UtilOK: true, MedianOK: true}},
			{Rate: 3000, Pattern: "regular", Step: -1,
				Predicted: recfile.PredictionValues{Throughput: 2900, BrokerUtil: 0.9, Latency: recfile.LatencyStats{Count: 100, P50Ns: 90e3, P99Ns: 300e3}, LatencyBins: bins}},
		},
		Goals: []recfile.PredictionGoal{{Name: "broker_util_within_5pp", Met: true, Detail: "worst +3.0 pp"}}}
}

// The page's data files hold exactly the numbers given, "nan" where
// nothing was measured; the distribution's shares sum to 1; the page has
// the error table and the goals.
func TestPredictPage(t *testing.T) {
	out := t.TempDir()
	files, err := PredictPage(predictTestPrediction(), testutil.OutDir(t, out))
	if err != nil {
		t.Fatal(err)
	}
	dat, err := os.ReadFile(filepath.Join(out, "plots", "predict_rates_regular.dat"))
	if err != nil {
		t.Fatal(err)
	}
	// The measured broker utilisation without the JIT compiler's 0.1.
	lines := slices.DeleteFunc(strings.Split(strings.TrimSpace(string(dat)), "\n"), func(l string) bool { return strings.HasPrefix(l, "#") })
	want := []string{"1000 999 1000 0.53 0.5 0 0 20000 10000 40000 80000", "3000 2900 nan 0.9 nan 0 nan 90000 nan 300000 nan"}
	if !slices.Equal(lines, want) {
		t.Errorf("predict_rates_regular.dat:\n%s\nwant rows\n%s", dat, strings.Join(want, "\n"))
	}
	hist, err := os.ReadFile(filepath.Join(out, "plots", "predict_hist_00_measured.dat"))
	if err != nil {
		t.Fatal(err)
	}
	if h := string(hist); !strings.Contains(h, " 0.75\n") || !strings.Contains(h, " 0.25\n") {
		t.Errorf("measured shares: want 0.75 and 0.25 (30 and 10 of 40):\n%s", h)
	}
	raw, err := os.ReadFile(filepath.Join(out, "prediction.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := html.UnescapeString(string(raw))
	for _, s := range []string{"Error per rate", "<td>+3.0</td>", "<td>0.500 +0.100 JIT</td>", "<td>2.00×</td>", "broker_util_within_5pp: met", "Latency distribution at 3000 msg/s (regular)"} {
		if !strings.Contains(page, s) {
			t.Errorf("prediction.html lacks %q", s)
		}
	}
	for _, f := range []string{"plots/predict_util_regular.gp", "figures/predict_hist_01.svg", "prediction.html"} {
		found := false
		for _, g := range files {
			found = found || filepath.ToSlash(g) == f
		}
		if _, err := os.Stat(filepath.Join(out, f)); err != nil || !found {
			t.Errorf("%s: %v, listed %v", f, err, found)
		}
	}
}
