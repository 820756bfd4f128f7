package monotime

import "testing"

func TestNowMatchesClockGettime(t *testing.T) {
	for i := 0; i < 100; i++ {
		a := Syscall()
		n := Now()
		b := Syscall()
		if n < a-50_000 || n > b+50_000 { // 50 µs of slack for the anchor's own read
			t.Fatalf("Now %d not within [%d, %d]", n, a, b)
		}
	}
}
