package recfile

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// jitPrefixes are the comms (the first 15 bytes of the name) of HotSpot's
// JIT compiler threads.
var jitPrefixes = []string{"C1 CompilerThre", "C2 CompilerThre"}

// IsJITThread says whether a thread of comm compiles for HotSpot's JIT.
// Compiling is a just-started JVM's warm-up, not the work of its messages:
// ActiveMQ's compiler threads took 0.28 of its 0.44 CPU in the first step
// of a sweep at 1 000 msg/s (2026-11-29).
func IsJITThread(comm string) bool {
	return slices.ContainsFunc(jitPrefixes, func(p string) bool { return strings.HasPrefix(comm, p) })
}

// JITWindow is the JIT compiler threads' CPU time in one window.
type JITWindow struct{ TStart, TEnd, CPUNs int64 }

// JITWindows are the windows of the recording in dir (thread_windows.csv)
// in which JIT compiler threads ran, by their start; empty when the
// target has no such thread or the recording has no such files.
func JITWindows(dir string) (map[int64]JITWindow, error) {
	out := map[int64]JITWindow{}
	threads, err := ReadTable[ThreadRow](filepath.Join(dir, ThreadsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	jit := map[int]bool{}
	for _, t := range threads {
		if IsJITThread(t.Comm) {
			jit[t.TID] = true
		}
	}
	if len(jit) == 0 {
		return out, nil
	}
	err = ScanTable(filepath.Join(dir, ThreadWindowsFile), func(r *ThreadWindowRow) error {
		if jit[r.TID] {
			w := out[r.TStart]
			out[r.TStart] = JITWindow{r.TStart, r.TEnd, w.CPUNs + r.CPUNs}
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	return out, err
}
