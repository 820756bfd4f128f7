package testutil

import (
	"testing"

	"github.com/brokertrace/brokertrace/outdir"
)

// OutDir opens dir (created if missing) as an output directory, closed
// when the test ends.
func OutDir(t testing.TB, dir string) *outdir.Dir {
	t.Helper()
	d, err := outdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
