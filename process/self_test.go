package process

import (
	"runtime"
	"strconv"
	"testing"
)

// TestParseCPUList: lists as /proc prints them, every CPU checked against
// this host's.
func TestParseCPUList(t *testing.T) {
	last := runtime.NumCPU() - 1
	set, err := ParseCPUList("0,0-" + strconv.Itoa(last))
	if err != nil || set.Count() != last+1 || !set.IsSet(0) || !set.IsSet(last) {
		t.Fatalf("0-%d: %d CPUs, %v", last, set.Count(), err)
	}
	for _, bad := range []string{"", "x", "1-0", "-1", "0,", strconv.Itoa(last + 1), "4096"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	for _, p := range []string{"idle", "batch", "nice", "normal"} {
		if got, err := ParsePriority(p); err != nil || string(got) != p {
			t.Errorf("%q: %q, %v", p, got, err)
		}
	}
	if _, err := ParsePriority("high"); err == nil {
		t.Error("high: no error")
	}
}
