package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestPlatformPage: a platform.json with a clustered samples file built
// here (3 low, 2 high) gives platform.html with the table and the CDF, and
// a .dat whose rows keep each sample's cluster.
func TestPlatformPage(t *testing.T) {
	dir := platformTestDir(t)
	if err := Platform(dir); err != nil {
		t.Fatal(err)
	}
	dat, err := os.ReadFile(filepath.Join(dir, "plots", "platform_timeslice.dat"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# value cdf cluster\n490 0.2 0\n500 0.4 0\n510 0.6 0\n4400 0.8 1\n4500 1 1\n"
	if string(dat) != want {
		t.Errorf(".dat:\n%s\nwant:\n%s", dat, want)
	}
	html, err := os.ReadFile(filepath.Join(dir, "platform.html"))
	if err != nil || !strings.Contains(string(html), "timeslice_ns") || !strings.Contains(string(html), "<svg") || !strings.Contains(string(html), "high cluster") {
		t.Errorf("platform.html lacks the table or the figure (%v)", err)
	}
}

// platformTestDir writes a platform.json with one timeslice property and
// its samples in two clusters.
func platformTestDir(t *testing.T) string {
	dir := t.TempDir()
	d := testutil.OutDir(t, dir)
	lo, hi := int64(0), int64(1)
	var rows []recfile.PlatformSample
	for i, v := range []float64{500, 4500, 510, 4400, 490} {
		c := &lo
		if v > 1000 {
			c = &hi
		}
		rows = append(rows, recfile.PlatformSample{Seq: int64(i), Value: v, Cluster: c})
	}
	if err := recfile.WriteTable(d, filepath.Join(recfile.PlatformSamplesDir, "timeslice.csv"), rows); err != nil {
		t.Fatal(err)
	}
	p := recfile.Platform{Properties: []recfile.PlatformProperty{{Name: recfile.PlatformTimeslice, Value: 3950, Unit: "ns", N: 5,
		Experiment: "timeslice", SamplesFile: filepath.Join(recfile.PlatformSamplesDir, "timeslice.csv"), SampleUnit: "ns", Method: "kmeans2"}}}
	if err := recfile.WriteJSON(d, recfile.PlatformFile, &p, outdir.FilePerm); err != nil {
		t.Fatal(err)
	}
	return dir
}
