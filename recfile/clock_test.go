package recfile

import "testing"

// TestClockMapping: a steady mapping subtracts; a stepped one is
// interpolated over the recording's span and flagged.
func TestClockMapping(t *testing.T) {
	c := Clock{StartNs: 1_000_000, EndNs: 1_000_000, UncertaintyNs: 50}
	if c.Stepped() || c.RealtimeToMonotonic(5_000_000, 0, 10) != 4_000_000 {
		t.Fatalf("steady: stepped %v, %d", c.Stepped(), c.RealtimeToMonotonic(5_000_000, 0, 10))
	}
	c.EndNs = 1_004_000 // 4 µs: within the tolerance
	if c.Stepped() {
		t.Fatal("4 µs counted as a step")
	}
	c.EndNs = 2_000_000 // stepped forward by 1 ms
	if !c.Stepped() {
		t.Fatal("1 ms step not seen")
	}
	for _, tc := range []struct{ real, want int64 }{
		{1_000_000 + 1_000_000, 1_000_000},             // start
		{3_000_000 + 1_500_000, 3_000_000},             // middle: half the step
		{5_000_000 + 2_000_000, 5_000_000},             // end
		{9_000_000 + 1_000_000, 9_000_000 - 1_000_000}, // past the end: the end's mapping
	} {
		if got := c.RealtimeToMonotonic(tc.real, 1_000_000, 5_000_000); got != tc.want {
			t.Errorf("RealtimeToMonotonic(%d) = %d, want %d", tc.real, got, tc.want)
		}
	}
}
