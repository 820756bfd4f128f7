package collect

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// ExactBusyTimerList names the exact busy columns' source on hosts
// without cpuidle: the idle time the kernel's tick code keeps per CPU.
const ExactBusyTimerList = "timer_list"

// timerList prints, per CPU, the idle time the tick code keeps when the
// kernel stops the tick in idle (NO_HZ, every distribution kernel):
// .idle_sleeptime and .iowait_sleeptime, in ns, taken with the monotonic
// clock as the idle loop is entered and left, and the clock's value when
// the file was printed ("now at"). busy = now − both is exact to the ns
// where cpuidle is missing (virtual machines without haltpoll,
// cpuidle.off=1) or idle=poll keeps the idle loop out of cpuidle. It
// counts interrupts taken in idle as busy, and, like cpuidle, an idle
// period only once it ends: each CPU is read by a thread pinned to it.
// The file is root's alone; it is opened before privileges are dropped.
const timerList = "/proc/timer_list"

// openTimerList opens the tick code's idle time for each of cpus (one
// handle each, for their pinned readers) and checks that the kernel
// keeps it.
func openTimerList(path string, cpus []int64) ([][]*os.File, error) {
	var files [][]*os.File
	buf := make([]byte, 0, 64<<10)
	for _, cpu := range cpus {
		f, err := os.Open(path)
		if err == nil {
			_, err = readTimerList(f, cpu, &buf)
			if err != nil {
				f.Close()
			}
		}
		if err != nil {
			for _, fs := range files {
				closeAll(fs)
			}
			return nil, err
		}
		files = append(files, []*os.File{f})
	}
	return files, nil
}

// readTimerList is the time the timer list f was printed (CLOCK_MONOTONIC)
// and the busy clock of cpu in it: that time less the CPU's idle and
// iowait time.
func readTimerList(f *os.File, cpu int64, buf *[]byte) (busyAt, error) {
	b, err := readAllAt(f, *buf)
	*buf = b[:0]
	if err != nil {
		return busyAt{}, fmt.Errorf("%s: %w", f.Name(), err)
	}
	now, ok := nsAfter(b, "now at ")
	if !ok {
		return busyAt{}, fmt.Errorf("%s: no \"now at\" line", f.Name())
	}
	head := []byte("\ncpu: " + strconv.FormatInt(cpu, 10) + "\n")
	at := bytes.Index(b, head)
	if at < 0 {
		return busyAt{}, fmt.Errorf("%s: no CPU %d", f.Name(), cpu)
	}
	sec := b[at+len(head):]
	if end := bytes.Index(sec, []byte("\ncpu: ")); end >= 0 {
		sec = sec[:end]
	}
	idle, ok1 := nsAfter(sec, ".idle_sleeptime")
	iowait, ok2 := nsAfter(sec, ".iowait_sleeptime")
	if !ok1 || !ok2 {
		return busyAt{}, fmt.Errorf("%s: no idle_sleeptime and iowait_sleeptime for CPU %d: the kernel keeps no tick-less idle time", f.Name(), cpu)
	}
	if idle+iowait == 0 || idle+iowait > now {
		return busyAt{}, fmt.Errorf("%s: CPU %d idle for %d ns of %d: the kernel keeps no tick-less idle time (nohz=off?)", f.Name(), cpu, idle+iowait, now)
	}
	return busyAt{now, now - idle - iowait}, nil
}

// readAllAt reads the whole of f from its start into buf's storage.
func readAllAt(f *os.File, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.ReadAt(buf[len(buf):cap(buf)], int64(len(buf)))
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// nsAfter parses the number in "KEY: N nsecs" or "KEY N nsecs" at the
// first KEY in b.
func nsAfter(b []byte, key string) (int64, bool) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	rest := bytes.TrimLeft(b[i+len(key):], " :")
	end := bytes.IndexByte(rest, ' ')
	if end < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	return n, err == nil
}
