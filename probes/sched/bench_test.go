package sched

import (
	"context"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/probes"
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
//	events  btf with the switch stream on, as a recording runs it (each
//	        switch also writes a record with the ended stint's charge;
//	        a reader drains the ring buffer on another CPU)
//	other   the probe (tp_btf) with another process as target: what every
//	        switch on the machine pays
//
// Reported per variant: ns/switch (wall time per hand-off), the median
// over its turns, so that bursts of other load on the machine fall out.
// The probe's cost per switch is btf-ns/switch minus empty-ns/switch;
// probe-ns/switch reports it, and probe-events-ns/switch the same with
// the stream on.
func BenchmarkSwitch(b *testing.B) {
	needRoot(b)
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || !set.IsSet(0) {
		b.Skip("needs CPU 0")
	}
	variants := []*variant{
		{name: "none"},
		{name: "empty", probe: loadProbe(b, 0, "", false)},
		{name: "btf", probe: loadProbe(b, os.Getpid(), PathBTF, false)},
		{name: "raw", probe: loadProbe(b, os.Getpid(), PathRaw, false)},
		{name: "events", probe: loadProbe(b, os.Getpid(), PathBTF, true)},
		{name: "other", probe: loadProbe(b, 1, PathBTF, false)},
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = variants[4].probe.ReadRing(ctx, probes.RingHandlers{Record: func([]byte) {}}) }()
	pp := newPingPong(b)
	defer pp.close()

	const chunk = 500 // round trips per turn
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
			v.turns = append(v.turns, float64(time.Since(start).Nanoseconds())/float64(2*n))
			v.detach()
			done += n
		}
	}
	b.StopTimer()
	perSwitch := map[string]float64{}
	for _, v := range variants {
		if len(v.turns) > 0 {
			slices.Sort(v.turns)
			perSwitch[v.name] = v.turns[len(v.turns)/2]
			b.ReportMetric(perSwitch[v.name], v.name+"-ns/switch")
		}
		if v.probe != nil {
			v.probe.Close()
		}
	}
	b.ReportMetric(perSwitch["btf"]-perSwitch["empty"], "probe-ns/switch")
	b.ReportMetric(perSwitch["events"]-perSwitch["empty"], "probe-events-ns/switch")
}

type variant struct {
	name  string
	probe *probes.Probe
	turns []float64 // ns per switch of each turn
}

// loadProbe loads the probe's programs for a path, or only the empty one
// when path is "", detached; events turns the switch stream on.
func loadProbe(b *testing.B, pid int, path Path, events bool) *probes.Probe {
	spec, err := loadSched()
	if err != nil {
		b.Fatal(err)
	}
	if err := probes.SetVars(spec, map[string]any{schedVarTargTgid: uint32(pid), schedVarEmitEvents: events}); err != nil {
		b.Fatal(err)
	}
	hs := hooks[path]
	if path == "" {
		hs = []probes.Hook{{Prog: schedProgSwitchEmpty, Tracepoint: "sched_switch", BTF: true}}
	}
	o := probes.Object{Name: "sched", Path: string(path), Hooks: hs}
	if events {
		o.Ring = schedMapSwitches
	}
	p, err := probes.Load(spec, o)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func (v *variant) attach(b *testing.B) {
	if v.probe == nil {
		return
	}
	if err := v.probe.Attach(); err != nil {
		b.Fatal(err)
	}
}

func (v *variant) detach() {
	if v.probe != nil {
		v.probe.Detach()
	}
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
