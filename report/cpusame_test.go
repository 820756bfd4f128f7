package report

import (
	"slices"
	"testing"
)

// Two every-k-th samples written by one call share their time; the second
// is left out of C_n (undefined over no time) instead of failing the whole
// series.
func TestDropSameTime(t *testing.T) {
	at := []int64{10, 20, 20, 20, 30, 30, 40}
	u := []int64{1, 2, 3, 4, 5, 6, 7}
	n := []float64{100, 200, 300, 400, 500, 600, 700}
	if got := dropSameTime(&at, &u, &n); got != 3 {
		t.Fatalf("removed %d, want 3", got)
	}
	if !slices.Equal(at, []int64{10, 20, 30, 40}) || !slices.Equal(u, []int64{1, 2, 5, 7}) || !slices.Equal(n, []float64{100, 200, 500, 700}) {
		t.Fatalf("at %v u %v n %v", at, u, n)
	}
}
