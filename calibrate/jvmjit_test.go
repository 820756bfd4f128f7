package calibrate

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/recfile"
)

// jitSample is the JIT compiler threads' CPU time so far (every such
// thread ever seen, at its last reading: HotSpot starts and ends C2
// threads as the work needs), read from /proc at t (CLOCK_MONOTONIC).
type jitSample struct{ t, ns int64 }

// sampleJIT reads the CPU time of pid's compiler threads from their
// schedstat every 10 ms until stop closes, and returns the samples: the
// truth the sweep's jit_util, taken from the recording's per-thread
// windows and threads.csv's names, is checked against.
func sampleJIT(pid int, stop <-chan struct{}) <-chan []jitSample {
	done := make(chan []jitSample, 1)
	go func() {
		last := map[string]int64{}
		var out []jitSample
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			readJIT(pid, last)
			var sum int64
			for _, v := range last {
				sum += v
			}
			out = append(out, jitSample{monotime.Now(), sum})
			select {
			case <-stop:
				done <- out
				return
			case <-tick.C:
			}
		}
	}()
	return done
}

// readJIT updates last with the run time of every thread of pid named as
// HotSpot names its C1 and C2 compiler threads.
func readJIT(pid int, last map[string]int64) {
	task := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tids, _ := os.ReadDir(task)
	for _, d := range tids {
		comm, err := os.ReadFile(filepath.Join(task, d.Name(), "comm"))
		if err != nil || !strings.HasPrefix(string(comm), "C1 CompilerThre") && !strings.HasPrefix(string(comm), "C2 CompilerThre") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(task, d.Name(), "schedstat"))
		if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
			if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				last[d.Name()] = ns
			}
		}
	}
}

// jitAt is the compiler threads' CPU time at t, linearly between samples.
func jitAt(s []jitSample, t int64) float64 {
	i, _ := slices.BinarySearchFunc(s, t, func(x jitSample, t int64) int { return cmp.Compare(x.t, t) })
	switch {
	case i == 0:
		return float64(s[0].ns)
	case i == len(s):
		return float64(s[len(s)-1].ns)
	}
	a, b := s[i-1], s[i]
	return float64(a.ns) + float64(b.ns-a.ns)*float64(t-a.t)/float64(b.t-a.t)
}

// checkJIT: the step's jit_util is the compiler threads' CPU over its
// measured window, as /proc's schedstat gave it. The recording counts
// whole windows of thread_windows.csv whose middle lies in the measured
// window, so it may count or miss up to half a window at each end: the
// bound is what the compiler threads ran there, plus 1 ms for the
// samples' 10 ms spacing and threads that ended between two.
func checkJIT(t *testing.T, out string, st recfile.SweepStep, s []jitSample) {
	t.Helper()
	rows, err := recfile.ReadTable[recfile.ThreadWindowRow](filepath.Join(out, st.Dir, recfile.ThreadWindowsFile))
	if err != nil || len(rows) == 0 {
		t.Fatalf("thread_windows.csv: %d rows, %v", len(rows), err)
	}
	half := (rows[0].TEnd - rows[0].TStart) / 2
	cpu := func(a, b int64) float64 { return jitAt(s, b) - jitAt(s, a) }
	w0, w1 := st.WindowStartNs, st.WindowEndNs
	secs := float64(w1-w0) / 1e9
	truth := cpu(w0, w1)
	edges := cpu(w0-half, w0+half) + cpu(w1-half, w1+half) + 1e6
	got := st.JITUtil * secs * 1e9
	msg := fmt.Sprintf("JIT compiler threads over the %.2f s window: %.1f ms in sweep.json (jit_util %.4f of broker_util %.4f), %.1f ms by /proc's schedstat; allowed %.1f ms (their CPU within half a %d ms window of either end)",
		secs, got/1e6, st.JITUtil, st.BrokerUtil, truth/1e6, edges/1e6, 2*half/1e6)
	t.Log(msg)
	if math.Abs(got-truth) > edges {
		t.Error(msg)
	}
	// A JVM started for the test compiles while its first load runs: a
	// window with no compiling would leave the check without a subject.
	if truth < 20e6 {
		t.Errorf("the JIT compiler ran %.1f ms in the window: too little to check jit_util against", truth/1e6)
	}
}
