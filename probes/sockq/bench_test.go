package sockq

import (
	"context"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/probes"
)

// BenchmarkReceive measures what the probe adds to every TCP segment a
// socket receives. A client writes 64-byte chunks over loopback (each one
// segment, one skb, one hook run on the receiving socket) while a goroutine
// reads them. The variants take turns in chunks of writes within one run,
// so that the machine's drifting load falls on all of them alike:
//
//	none     no program attached
//	floor    an empty tp_btf program on the same hook: the floor any probe pays
//	watched  the probe, the receiving socket's port watched: every segment
//	         takes the full path and writes a sample to the ring buffer
//	other    the probe, another port watched: what every socket on the
//	         machine pays
//
// Reported per variant: ns/write (wall time of the write(2) that delivers
// the segment over loopback, receive path included) and, from the kernel's
// own BPF statistics (BPF_STATS_RUN_TIME, which exclude the benchmark's
// loop), prog-ns/run and runs/write. On the tcp_probe path the hook also
// runs for the ACKs the client receives (another port: the early return).
func BenchmarkReceive(b *testing.B) {
	testutil.RequireRoot(b, "loads eBPF programs")
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	for _, path := range paths {
		b.Run(string(path), func(b *testing.B) { benchReceive(b, path) })
	}
}

type benchVariant struct {
	name    string
	prog    *ebpf.Program
	l       link.Link
	elapsed time.Duration
	writes  int
	runtime time.Duration
	runs    uint64
}

func (v *benchVariant) attach(b *testing.B) {
	if v.prog == nil {
		return
	}
	l, err := link.AttachTracing(link.TracingOptions{Program: v.prog, AttachType: ebpf.AttachTraceRawTp})
	if err != nil {
		b.Fatal(err)
	}
	v.l = l
}

func (v *benchVariant) detach() {
	if v.l != nil {
		v.l.Close()
		v.l = nil
	}
}

func progStats(p *ebpf.Program) (time.Duration, uint64) {
	if p == nil {
		return 0, 0
	}
	s, err := p.Stats()
	if err != nil {
		return 0, 0
	}
	return s.Runtime, s.RunCount
}

// probeVariant opens the probe on ports and detaches it: the benchmark
// attaches its per-segment program itself, turn by turn. Its samples are
// read (and dropped) as in a recording.
func probeVariant(b *testing.B, name string, path Path, ports []uint16) *benchVariant {
	tr, err := Open(Options{Ports: ports, Path: path})
	if err != nil {
		b.Fatal(err)
	}
	tr.Detach()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		tr.Read(ctx, func(*Sample) {}, nil)
		close(done)
	}()
	b.Cleanup(func() { cancel(); <-done; tr.Close() })
	return &benchVariant{name: name, prog: tr.Probe.Programs()[0]}
}

// floorVariant loads the empty program of the path's hook.
func floorVariant(b *testing.B, path Path) *benchVariant {
	spec, err := loadSockq()
	if err != nil {
		b.Fatal(err)
	}
	h := hooks[path][0]
	h.Prog = "floor_" + string(path)
	p, err := probes.Load(spec, probes.Object{Name: "floor", Path: string(path), Hooks: []probes.Hook{h}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return &benchVariant{name: "floor", prog: p.Programs()[0]}
}

func benchReceive(b *testing.B, path Path) {
	ln, port := listener(b)
	client, server := connect(b, ln, port)
	go func() { // the reader
		buf := make([]byte, 1<<16)
		for {
			if n, err := unix.Read(server, buf); n <= 0 || err != nil {
				return
			}
		}
	}()
	variants := []*benchVariant{
		{name: "none"},
		floorVariant(b, path),
		probeVariant(b, "watched", path, []uint16{port}),
		probeVariant(b, "other", path, []uint16{port + 1}),
	}
	buf := make([]byte, 64)
	const chunk = 2000 // writes per turn
	b.ResetTimer()
	for done := 0; done < b.N; {
		for _, v := range variants {
			n := min(chunk, b.N-done)
			if n == 0 {
				break
			}
			v.attach(b)
			rt0, runs0 := progStats(v.prog)
			start := time.Now()
			for range n {
				if _, err := unix.Write(client, buf); err != nil {
					b.Fatal(err)
				}
			}
			v.elapsed += time.Since(start)
			rt1, runs1 := progStats(v.prog)
			v.detach()
			v.writes += n
			v.runtime += rt1 - rt0
			v.runs += runs1 - runs0
			done += n
		}
	}
	b.StopTimer()
	unix.Shutdown(client, unix.SHUT_WR)
	for _, v := range variants {
		if v.writes == 0 {
			continue
		}
		b.ReportMetric(float64(v.elapsed)/float64(v.writes), v.name+"-ns/write")
		if v.runs > 0 {
			b.ReportMetric(float64(v.runtime)/float64(v.runs), v.name+"-prog-ns/run")
			b.ReportMetric(float64(v.runs)/float64(v.writes), v.name+"-runs/write")
		}
	}
}
