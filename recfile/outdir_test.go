package recfile

import (
	"testing"

	"github.com/brokertrace/brokertrace/outdir"
)

// outDir opens dir as an output directory for the test.
func outDir(t testing.TB, dir string) *outdir.Dir {
	t.Helper()
	d, err := outdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
