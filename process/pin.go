package process

import (
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// pinned are the threads of this process that pinned themselves to one
// CPU (PinThread): PlaceSelf leaves their affinity alone. A reader of a
// CPU's idle residency must run on that CPU, or an idle CPU's residency
// lacks the idle period in progress; record places its threads after its
// sources started those readers, and moving them all to --self-cpus made
// the broker's CPU read from the load's: an idle step's machine busy time
// came out at −0.056 CPUs.
var pinned sync.Map // tid → true

// PinThread locks the calling goroutine to its thread and the thread to
// cpu, and keeps it there when PlaceSelf moves the process's threads
// (their scheduling it still changes). It returns the thread's id, for
// UnpinThread when the goroutine ends; the thread stays locked, so that
// it ends with the goroutine rather than going back to Go's runtime
// pinned.
func PinThread(cpu int) (int, error) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return 0, err
	}
	tid := unix.Gettid()
	pinned.Store(tid, true)
	return tid, nil
}

// UnpinThread forgets a thread PinThread pinned, whose id a new thread may
// take once it has ended.
func UnpinThread(tid int) { pinned.Delete(tid) }

// isPinned says whether PlaceSelf must leave tid's affinity.
func isPinned(tid int) bool {
	_, ok := pinned.Load(tid)
	return ok
}
