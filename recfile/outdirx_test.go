package recfile_test

import (
	"testing"

	"github.com/brokertrace/brokertrace/outdir"
)

// openOut opens dir as an output directory for the test.
func openOut(t testing.TB, dir string) *outdir.Dir {
	t.Helper()
	d, err := outdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
