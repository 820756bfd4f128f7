package platform

import (
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// shortDemand is Ginpex's measured task: a demand of demand_ns of CPU
// work, back to back, each one's wall-clock response time a sample. The
// work is a loop calibrated before the load starts competing (the
// quickest of several trial runs), not a loop on the thread's CPU clock:
// reading CLOCK_THREAD_CPUTIME_ID makes the kernel update the thread's
// runtime and check its slice at every read, so the thread would end its
// own slice at the exact nanosecond instead of at the tick as a CPU-bound
// thread does. The spinners pinned to the same CPU are watched through
// schedstat: their on-CPU time per run stretch is the slice they got.
func shortDemand(m *measurement) error {
	demand := int64(m.param("demand_ns", 500_000))
	iters, x := calibrate(demand)
	watch := m.sameCPULoadTIDs()
	run0, str0 := sumSchedstat(watch)
	for {
		t0 := now()
		x = spinWork(iters, x)
		if !m.emit(float64(now() - t0)) {
			break
		}
	}
	sink.Store(x)
	m.extra("demand_calibrated_iterations", "iterations", float64(iters), fmt.Sprintf("xorshift steps that took %s on the quickest of 20 trial runs", fmtNs(float64(demand))))
	run1, str1 := sumSchedstat(watch)
	if str1 > str0 {
		m.extra("schedstat_slice_ns", "ns", float64(run1-run0)/float64(str1-str0),
			fmt.Sprintf("on-CPU time per run stretch of the %d spinner(s) on the measured CPU, /proc/PID/task/TID/schedstat", len(watch)))
	}
	return nil
}

// calibrate finds how many spinWork steps take ns: the quickest of 20
// trials of a tenth of it, scaled; the quickest is the one no other task
// or interrupt stretched.
func calibrate(ns int64) (iters int, x uint64) {
	x = 88172645463325252
	probe := 10_000
	for {
		t0 := now()
		x = spinWork(probe, x)
		if now()-t0 >= ns/10 || probe > 1<<30 {
			break
		}
		probe *= 2
	}
	best := int64(1 << 62)
	for range 20 {
		t0 := now()
		x = spinWork(probe, x)
		best = min(best, now()-t0)
	}
	return max(1, int(float64(probe)*float64(ns)/float64(max(best, 1)))), x
}

func sumSchedstat(tids []int) (run, stretches int64) {
	for _, tid := range tids {
		r, s, err := schedstat(tid)
		if err == nil {
			run += r
			stretches += s
		}
	}
	return run, stretches
}

// wakeup: the peer sleeps period_ns, stamps the time and wakes the
// measured thread blocked in FUTEX_WAIT; the sample is the time from the
// stamp to the measured thread running.
func wakeup(m *measurement) error {
	period := int64(m.param("period_ns", 500_000))
	word := new(uint32) // 0 waiting, 1 woken, 2 stop
	var stamp atomic.Int64
	var stop atomic.Bool
	err := m.peer(func() {
		for !stop.Load() {
			rawNanosleep(period)
			if atomic.LoadUint32(word) != 0 {
				continue // the last wake-up is not consumed yet
			}
			stamp.Store(now())
			atomic.StoreUint32(word, 1)
			futex(word, futexWake, 1)
		}
	})
	if err != nil {
		return err
	}
	for {
		waitWhile(word, 0)
		lat := now() - stamp.Load()
		atomic.StoreUint32(word, 0)
		if !m.emit(float64(lat)) {
			break
		}
	}
	stop.Store(true)
	m.waitPeer()
	return nil
}

// tcpEcho: a message of size bytes to a peer thread over loopback TCP
// and back; the sample is one round trip.
func tcpEcho(m *measurement) error {
	size := m.param("size", 64)
	lfd, port, err := listenLoopback()
	if err != nil {
		return err
	}
	defer unix.Close(lfd)
	err = m.peer(func() {
		fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
		if err != nil {
			return
		}
		defer unix.Close(fd)
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		buf := make([]byte, size)
		for readFull(fd, buf) && writeFull(fd, buf) {
		}
	})
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return err
	}
	buf := make([]byte, size)
	ok := true
	batched(m, func() { ok = ok && writeFull(fd, buf) && readFull(fd, buf) })
	unix.Close(fd)
	m.waitPeer()
	if !ok {
		return fmt.Errorf("tcp-echo: the connection broke")
	}
	return nil
}

func listenLoopback() (fd, port int, err error) {
	fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, err
	}
	if err = unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err == nil {
		err = unix.Listen(fd, 1)
	}
	var sa unix.Sockaddr
	if err == nil {
		sa, err = unix.Getsockname(fd)
	}
	if err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	return fd, sa.(*unix.SockaddrInet4).Port, nil
}

// referenceLoop runs chunks of CPU-bound work calibrated to chunk_ns on
// the quietest of 20 trial runs, and reads /proc/stat's steal for its
// CPU around each; the sample is the share of the chunk's wall time the
// hypervisor reported stolen. The chunks' wall time against the
// calibrated time and the thread's CPU time against wall time are
// reported beside it.
func referenceLoop(m *measurement) error {
	chunk := m.param("chunk_ns", 50_000_000)
	iters, x := calibrate(int64(chunk))
	var wallSum, cpuSum float64
	var chunks int
	for {
		s0, err := stealTicks(m.cpu)
		if err != nil {
			return err
		}
		t0, c0 := now(), threadCPUTime()
		x = spinWork(iters, x)
		wall, cpu := now()-t0, threadCPUTime()-c0
		s1, err := stealTicks(m.cpu)
		if err != nil {
			return err
		}
		wallSum += float64(wall)
		cpuSum += float64(cpu)
		chunks++
		// USER_HZ is 100 on every Linux ABI: a tick is 10 ms.
		if !m.emit(float64(s1-s0) * 1e7 / float64(wall)) {
			break
		}
	}
	sink.Store(x)
	m.extra("reference_loop_slowdown", "ratio", wallSum/float64(chunks)/float64(chunk),
		fmt.Sprintf("mean wall time of a %s chunk of work / its calibrated (quietest) time", fmtNs(float64(chunk))))
	m.extra("cpu_available_fraction", "fraction", cpuSum/wallSum, "thread CPU time / wall time of the pinned reference loop")
	return nil
}

func fmtNs(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.3g s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3g ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.3g µs", ns/1e3)
	}
	return fmt.Sprintf("%.3g ns", ns)
}
