package platform

import (
	"maps"
	"slices"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// kind is one task kind the code implements. measure runs on the measured
// task's pinned thread and emits samples until m.emit says stop; load runs
// on a load thread until stop is set.
type kind struct {
	doc     string
	measure func(m *measurement) error
	load    func(stop *atomic.Bool)
}

var kinds = map[string]kind{
	"spin":           {doc: "CPU-bound load, never blocks", load: spinLoad},
	"pingpong-pipe":  {doc: "round trip of one byte through two blocking pipes to a peer thread (params: batch)", measure: pingpongPipe},
	"pingpong-futex": {doc: "round trip of a futex hand-off to a peer thread (params: batch)", measure: pingpongFutex},
	"pipe-rw":        {doc: "write then read one byte of a pipe on one thread, never blocking (params: batch)", measure: pipeRW},
	"futex-noop":     {doc: "FUTEX_WAKE without waiters plus FUTEX_WAIT on a changed word (params: batch)", measure: futexNoop},
	"getppid":        {doc: "getppid(2) in a loop, the cheapest system call (params: batch)", measure: getppidLoop},
	"clock_gettime":  {doc: "clock_gettime(CLOCK_MONOTONIC) through the vDSO (params: batch)", measure: clockGettime},
	"clock-step":     {doc: "smallest positive difference of consecutive CLOCK_MONOTONIC reads (params: batch)", measure: clockStep},
	"nanosleep":      {doc: "nanosleep overshoot past the request (params: request_ns)", measure: nanosleepOvershoot},
	"short-demand":   {doc: "response time of a fixed CPU demand measured in thread CPU time (params: demand_ns)", measure: shortDemand},
	"wakeup":         {doc: "time from a futex wake on the peer to the woken thread running (params: period_ns)", measure: wakeup},
	"tcp-echo":       {doc: "loopback TCP round trip of a message to an echoing peer thread (params: size, batch)", measure: tcpEcho},
	"reference-loop": {doc: "calibrated CPU-bound work in chunks against /proc/stat steal (params: chunk_ns)", measure: referenceLoop},
}

// KindNames lists the task kinds, sorted.
func KindNames() []string { return slices.Sorted(maps.Keys(kinds)) }

// KindDoc describes a kind.
func KindDoc(name string) string { return kinds[name].doc }

func spinLoad(stop *atomic.Bool) {
	x := uint64(88172645463325252)
	for !stop.Load() {
		x = spinWork(1000, x)
	}
	sink.Store(x)
}

// batched emits op's mean time per call over batches of the batch
// parameter, in wall or (clock "cpu") process CPU time.
func batched(m *measurement, op func()) { batchedCounting(m, op, nil) }

// batchedCounting is batched keeping only the batches over which count,
// read before and after each (outside its time), grew by at least one per
// call; it returns how many it left out. With nothing kept the rule's time
// cap never comes (emit is not called), so twice that cap ends the run.
func batchedCounting(m *measurement, op func(), count func() int64) (left int) {
	batch, clock := m.param("batch", 1000), now
	if m.task.Clock == "cpu" {
		clock = processCPUTime
	}
	limit := now() + int64(2*m.rule.MaxSeconds*1e9)
	for {
		var c0 int64
		if count != nil {
			if now() > limit {
				m.res.StopReason = "time"
				return left
			}
			c0 = count()
		}
		t0 := clock()
		for range batch {
			op()
		}
		t1 := clock()
		if count != nil && count()-c0 < int64(batch) {
			left++
			continue
		}
		if !m.emit(float64(t1-t0) / float64(batch)) {
			return left
		}
	}
}

func pingpongPipe(m *measurement) error {
	var ab, ba [2]int
	if err := unix.Pipe2(ab[:], unix.O_CLOEXEC); err != nil {
		return err
	}
	if err := unix.Pipe2(ba[:], unix.O_CLOEXEC); err != nil {
		return err
	}
	defer unix.Close(ba[0])
	err := m.peer(func() {
		b := []byte{0}
		for rawRead(ab[0], b) == 1 && rawWrite(ba[1], b) == 1 {
		}
		unix.Close(ab[0])
		unix.Close(ba[1])
	})
	if err != nil {
		return err
	}
	b := []byte{0}
	batched(m, func() { rawWrite(ab[1], b); rawRead(ba[0], b) })
	unix.Close(ab[1]) // the peer reads EOF and ends
	m.waitPeer()
	return nil
}

// pingpongFutex hands a futex word to the peer and back. A round trip
// holds a context switch of this thread only if it slept in its wait or
// was preempted by the peer: with the peer's CPU awake (busy with
// something else, or polling before it idles) the answer can come before
// the wait begins, a cache-line hand-off of a few hundred ns. A batch with
// fewer of this thread's switches (getrusage) than round trips is no
// sample of a switch: it is left out, and the count is reported
// (futex_batches_without_switch).
func pingpongFutex(m *measurement) error {
	word := new(uint32) // 0: peer's turn to wait, 1: peer runs, 2: stop
	err := m.peer(func() {
		for {
			waitWhile(word, 0)
			if atomic.LoadUint32(word) == 2 {
				return
			}
			atomic.StoreUint32(word, 0)
			futex(word, futexWake, 1)
		}
	})
	if err != nil {
		return err
	}
	left := batchedCounting(m, func() {
		atomic.StoreUint32(word, 1)
		futex(word, futexWake, 1)
		waitWhile(word, 1)
	}, threadSwitches)
	m.extra("futex_batches_without_switch", "batches", float64(left),
		"batches left out because this thread switched fewer times than it made round trips (the peer answered before the wait: no switch)")
	atomic.StoreUint32(word, 2)
	futex(word, futexWake, 1)
	m.waitPeer()
	return nil
}

func pipeRW(m *measurement) error {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return err
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	b := []byte{0}
	batched(m, func() { rawWrite(p[1], b); rawRead(p[0], b) })
	return nil
}

func futexNoop(m *measurement) error {
	word := new(uint32)
	batched(m, func() {
		futex(word, futexWake, 1)
		futex(word, futexWait, 1) // *word is 0: EAGAIN at once
	})
	return nil
}

func getppidLoop(m *measurement) error {
	batched(m, func() { unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0) })
	return nil
}

func clockGettime(m *measurement) error {
	var x int64
	batched(m, func() { x += now() })
	sink.Store(uint64(x))
	var res unix.Timespec
	if unix.ClockGetres(unix.CLOCK_MONOTONIC, &res) == nil {
		m.extra("clock_getres_ns", "ns", float64(res.Nano()), "clock_getres(CLOCK_MONOTONIC)")
	}
	return nil
}

func clockStep(m *measurement) error {
	batch := m.param("batch", 1000)
	for {
		best := int64(1 << 62)
		prev := now()
		for range batch {
			t := now()
			if d := t - prev; d > 0 && d < best {
				best = d
			}
			prev = t
		}
		if !m.emit(float64(best)) {
			return nil
		}
	}
}

func nanosleepOvershoot(m *measurement) error {
	req := int64(m.param("request_ns", 1000))
	for {
		t0 := now()
		rawNanosleep(req)
		if !m.emit(float64(now() - t0 - req)) {
			return nil
		}
	}
}
