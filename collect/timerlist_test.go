package collect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadTimerList: each CPU's busy clock comes from its own section of
// the timer list (the same keys appear under every CPU), and a kernel that
// keeps no tick-less idle time is refused.
func TestReadTimerList(t *testing.T) {
	const list = `Timer List Version: v0.10
HRTIMER_MAX_CLOCK_BASES: 8
now at 3938474456887 nsecs

cpu: 0
 clock 0:
  .base:               ffff8f3d7bc20d80
 #0: <ffffa5a0c00e3e68>, tick_nohz_handler, S:01
 # expires at 3938476000000-3938476000000 nsecs [in 1543113 to 1543113 nsecs]
  .idle_entrytime : 3938464016165 nsecs
  .idle_sleeptime : 1033472432891 nsecs
  .iowait_sleeptime: 4580259185 nsecs
  .last_jiffies   : 4295876912

cpu: 1
 clock 0:
  .idle_entrytime : 3938471901050 nsecs
  .idle_sleeptime : 967085596865 nsecs
  .iowait_sleeptime: 37125382870 nsecs

Tick Device: mode:     1
`
	path := filepath.Join(t.TempDir(), "timer_list")
	if err := os.WriteFile(path, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	files, err := openTimerList(path, []int64{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for i, want := range []int64{3938474456887 - 1033472432891 - 4580259185, 3938474456887 - 967085596865 - 37125382870} {
		got, err := readTimerList(files[i][0], int64(i), &buf)
		if err != nil || got.busy != want || got.at != 3938474456887 {
			t.Errorf("CPU %d: busy clock %d at %d (%v), want %d at 3938474456887", i, got.busy, got.at, err, want)
		}
		files[i][0].Close()
	}
	off := strings.ReplaceAll(list, ".idle_sleeptime : 967085596865", ".idle_sleeptime : 0")
	off = strings.ReplaceAll(off, ".iowait_sleeptime: 37125382870", ".iowait_sleeptime: 0")
	if err := os.WriteFile(path, []byte(off), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openTimerList(path, []int64{0, 1}); err == nil || !strings.Contains(err.Error(), "no tick-less idle time") {
		t.Fatalf("a CPU never idle by the tick code: %v, want refused", err)
	}
	if _, err := openTimerList(path, []int64{2}); err == nil || !strings.Contains(err.Error(), "no CPU 2") {
		t.Fatalf("a CPU missing: %v", err)
	}
}
