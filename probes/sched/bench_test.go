package sched

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// BenchmarkSwitch measures what the probe adds to a context switch. Two
// threads pinned to CPU 0 hand a byte back and forth through pipes, so every
// hand-off is one switch between them and one wakeup. The variants take
// turns in chunks of round trips within one run, so that the machine's
// drifting load falls on all of them alike:
//
//	none    no program attached
//	empty   an empty tp_btf program on sched_switch: the floor any probe pays
//	btf     the probe (tp_btf), the benchmark's own process as target, so
//	        every switch and wakeup takes the full per-thread path
//	raw     the same on the raw_tp path
//	other   the probe (tp_btf) with another process as target: what every
//	        switch on the machine pays
//
// Reported per variant: ns/switch (wall time per hand-off). The probe's
// cost per switch is btf-ns/switch minus empty-ns/switch; probe-ns/switch
// reports it.
func BenchmarkSwitch(b *testing.B) {
	needRoot(b)
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || !set.IsSet(0) {
		b.Skip("needs CPU 0")
	}
	variants := []*variant{
		{name: "none"},
		{name: "empty", progs: loadProgs(b, 0, "")},
		{name: "btf", progs: loadProgs(b, os.Getpid(), PathBTF)},
		{name: "raw", progs: loadProgs(b, os.Getpid(), PathRaw)},
		{name: "other", progs: loadProgs(b, 1, PathBTF)},
	}
	pp := newPingPong(b)
	defer pp.close()

	const chunk = 2000 // round trips per turn
	b.ResetTimer()
	for done := 0; done < b.N; {
		for _, v := range variants {
			n := min(chunk, b.N-done)
			if n == 0 {
				break
			}
			v.attach(b)
			start := time.Now()
			pp.run(b, n)
			v.elapsed += time.Since(start)
			v.trips += n
			v.detach()
			done += n
		}
	}
	b.StopTimer()
	perSwitch := map[string]float64{}
	for _, v := range variants {
		if v.trips > 0 {
			perSwitch[v.name] = float64(v.elapsed.Nanoseconds()) / float64(2*v.trips)
			b.ReportMetric(perSwitch[v.name], v.name+"-ns/switch")
		}
		if v.progs != nil {
			v.progs.Close()
		}
	}
	b.ReportMetric(perSwitch["btf"]-perSwitch["empty"], "probe-ns/switch")
}

type variant struct {
	name    string
	progs   *ebpf.Collection
	links   []link.Link
	elapsed time.Duration
	trips   int
}

// loadProgs loads the probe's programs for a path, or only the empty one
// when path is "".
func loadProgs(b *testing.B, pid int, path Path) *ebpf.Collection {
	spec, err := loadSched()
	if err != nil {
		b.Fatal(err)
	}
	if err := spec.Variables["targ_tgid"].Set(uint32(pid)); err != nil {
		b.Fatal(err)
	}
	keep := map[string]bool{}
	for _, h := range hooks {
		switch path {
		case PathBTF:
			keep[h.BTF] = true
		case PathRaw:
			keep[h.Raw] = true
		}
	}
	if path == "" {
		keep["switch_empty"] = true
	}
	for name := range spec.Programs {
		if !keep[name] {
			delete(spec.Programs, name)
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		b.Fatal(err)
	}
	return coll
}

func (v *variant) attach(b *testing.B) {
	if v.progs == nil {
		return
	}
	for name, p := range v.progs.Programs {
		var (
			l   link.Link
			err error
		)
		if p.Type() == ebpf.Tracing {
			l, err = link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
		} else {
			l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: rawTracepoint(name), Program: p})
		}
		if err != nil {
			b.Fatal(err)
		}
		v.links = append(v.links, l)
	}
}

func rawTracepoint(prog string) string {
	for _, h := range hooks {
		if h.Raw == prog {
			return h.Tracepoint
		}
	}
	return ""
}

func (v *variant) detach() {
	for _, l := range v.links {
		l.Close()
	}
	v.links = nil
}

// pingPong is two threads pinned to CPU 0 that pass a byte through pipes on
// request.
type pingPong struct {
	ab, ba [2]int
	start  [2]chan int
	done   chan error
}

func newPingPong(b *testing.B) *pingPong {
	pp := &pingPong{start: [2]chan int{make(chan int), make(chan int)}, done: make(chan error, 2)}
	if err := unix.Pipe(pp.ab[:]); err != nil {
		b.Fatal(err)
	}
	if err := unix.Pipe(pp.ba[:]); err != nil {
		b.Fatal(err)
	}
	go pp.thread(0, pp.ba[0], pp.ab[1])
	go pp.thread(1, pp.ab[0], pp.ba[1])
	return pp
}

// thread 0 writes first; thread 1 answers.
func (pp *pingPong) thread(id, rd, wr int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
		pp.done <- err
		return
	}
	buf := []byte{0}
	for n := range pp.start[id] {
		var err error
		for i := 0; i < n && err == nil; i++ {
			if id == 0 {
				_, err = unix.Write(wr, buf)
			}
			if err == nil {
				_, err = unix.Read(rd, buf)
			}
			if id == 1 && err == nil {
				_, err = unix.Write(wr, buf)
			}
		}
		pp.done <- err
	}
}

func (pp *pingPong) run(b *testing.B, n int) {
	pp.start[1] <- n
	pp.start[0] <- n
	for i := 0; i < 2; i++ {
		if err := <-pp.done; err != nil {
			b.Fatal(err)
		}
	}
}

func (pp *pingPong) close() {
	close(pp.start[0])
	close(pp.start[1])
	for _, fd := range []int{pp.ab[0], pp.ab[1], pp.ba[0], pp.ba[1]} {
		unix.Close(fd)
	}
}
