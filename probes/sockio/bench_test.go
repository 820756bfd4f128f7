package sockio

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/frame"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/probes"
)

// The benchmarks print, for every figure, the floor measured in the same
// run: the same system calls with no program, and with an empty program on
// the same hook. Program run time per call comes from the kernel's own BPF
// statistics (BPF_STATS_RUN_TIME), which exclude the benchmark's loop.

// floorHooks are the empty programs of each path, on the path's hooks.
var floorHooks = map[Path][]probes.Hook{
	PathSock: {
		{Prog: sockioProgFloorSockRecv, Tracepoint: "sock_recv_length", BTF: true},
		{Prog: sockioProgFloorSockSend, Tracepoint: "sock_send_length", BTF: true},
	},
	PathSyscalls: {{Prog: sockioProgFloorSysExit, Tracepoint: "sys_exit"}},
}

// readFloorHooks: on the sock path, the least a scan of a write pays — the
// call's registers and one 8-byte read of its buffer (floor_read_send).
var readFloorHooks = []probes.Hook{{Prog: sockioProgFloorReadSend, Tracepoint: "sock_send_length", BTF: true}}

// floor attaches the programs of hooks (the floor programs) and returns a
// detach func.
func floor(b *testing.B, path Path, hooks []probes.Hook) (progs []*ebpf.Program, detach func()) {
	b.Helper()
	spec, err := loadSockio()
	if err != nil {
		b.Fatal(err)
	}
	if err := probes.SetVars(spec, map[string]any{sockioVarTargTgid: uint32(os.Getpid())}); err != nil {
		b.Fatal(err)
	}
	p, err := probes.Load(spec, probes.Object{Name: "floor", Path: string(path), Hooks: hooks})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Attach(); err != nil {
		b.Fatal(err)
	}
	return p.Programs(), func() { p.Close() }
}

// runStats sums run time and count of programs.
func runStats(progs []*ebpf.Program) (time.Duration, uint64) {
	var rt time.Duration
	var n uint64
	for _, p := range progs {
		if s, err := p.Stats(); err == nil {
			rt += s.Runtime
			n += s.RunCount
		}
	}
	return rt, n
}

// drain hands fd to a child process that reads and discards everything,
// so that the benchmark's reads are not traced (the probe follows only this
// process) and do not compete for the benchmark's own threads.
func drain(fd int) chan struct{} {
	done := make(chan struct{})
	f := os.NewFile(uintptr(fd), "sink")
	cmd := exec.Command("cat")
	cmd.Stdin = f
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	go func() {
		cmd.Wait()
		close(done)
	}()
	return done
}

func payload(size int, kind string) []byte {
	b := make([]byte, size)
	switch kind {
	case "text": // no 'B' at all: the scan's best case
		for i := range b {
			b[i] = "abcdefghijklmnopqrstuvwxyz0123456789 \r\n"[i%39]
		}
	case "random": // about one 'B' every 256 bytes: candidate words to check
		r := rand.New(rand.NewPCG(1, 1))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
	case "marker":
		for i := range b {
			b[i] = 'x'
		}
		marker.Put(b[size/2-marker.Len/2:], 42)
	}
	return b
}

// writeLoop times b.N writes of buf and reports ns per write.
func writeLoop(b *testing.B, buf []byte, progs []*ebpf.Program) {
	cfd, sfd := tcpPair(b)
	done := drain(sfd)
	rt0, n0 := runStats(progs)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := unix.Write(cfd, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	rt1, n1 := runStats(progs)
	if n1 > n0 {
		b.ReportMetric(float64(rt1-rt0)/float64(n1-n0), "prog-ns/run")
		if len(buf) >= 1024 {
			b.ReportMetric(float64(rt1-rt0)/float64(n1-n0)/(float64(len(buf))/1024), "prog-ns/KiB")
		}
	}
	unix.Shutdown(cfd, unix.SHUT_WR)
	<-done
}

// BenchmarkSocketCall: the cost of one traced write(2) on a TCP socket.
// "none" has no program; "floor" an empty program on the same hook;
// "floor-read" one that only reads the call's first 8 bytes, the least a
// scan pays; "probe" the real probe with no marker and with one marker in
// the bytes.
func BenchmarkSocketCall(b *testing.B) {
	testutil.RequireRoot(b, "loads eBPF programs")
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	for _, size := range []int{128, 1024} {
		sz := "/" + itoa(size) + "B"
		b.Run("none"+sz, func(b *testing.B) { writeLoop(b, payload(size, "text"), nil) })
		for _, path := range kernelPaths(b) {
			b.Run(string(path)+"/floor"+sz, func(b *testing.B) {
				progs, detach := floor(b, path, floorHooks[path])
				defer detach()
				writeLoop(b, payload(size, "text"), progs)
			})
			if path == PathSock {
				b.Run(string(path)+"/floor-read"+sz, func(b *testing.B) {
					progs, detach := floor(b, path, readFloorHooks)
					defer detach()
					writeLoop(b, payload(size, "text"), progs)
				})
			}
			for _, kind := range []string{"text", "marker"} {
				b.Run(string(path)+"/probe-"+kind+sz, func(b *testing.B) {
					tr, err := Open(Options{PID: os.Getpid(), Path: path})
					if err != nil {
						b.Fatal(err)
					}
					defer tr.Close()
					ctx, cancel := context.WithCancel(context.Background())
					go tr.Read(ctx, func(*events.IO) {})
					writeLoop(b, payload(size, kind), tr.Probe.Programs())
					cancel()
					if st, _ := tr.Stats(); st.DroppedEvents != 0 {
						b.Errorf("dropped %d events", st.DroppedEvents)
					}
				})
			}
		}
	}
}

// BenchmarkScan: the probe's cost per KiB scanned, from writes of 1 KiB
// and 64 KiB of binary (random) and ASCII-text payloads, next to the empty
// program on the same hook (whose cost per KiB is the floor).
func BenchmarkScan(b *testing.B) {
	testutil.RequireRoot(b, "loads eBPF programs")
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	for _, size := range []int{1 << 10, 64 << 10} {
		sz := "/" + itoa(size) + "B"
		b.Run("floor"+sz, func(b *testing.B) {
			progs, detach := floor(b, PathSock, floorHooks[PathSock])
			defer detach()
			writeLoop(b, payload(size, "text"), progs)
		})
		for _, kind := range []string{"text", "random"} {
			b.Run("probe-"+kind+sz, func(b *testing.B) {
				tr, err := Open(Options{PID: os.Getpid(), Path: PathSock})
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Close()
				writeLoop(b, payload(size, kind), tr.Probe.Programs())
				st, _ := tr.Stats()
				if st.FaultBytes != [2]uint64{} || st.Unscanned != [2]uint64{} {
					b.Errorf("not all bytes scanned: %+v", st)
				}
			})
		}
	}
}

// BenchmarkEventRate: markers delivered to user space per second, with
// writes of 32 back-to-back markers, and the drops (which must be zero).
func BenchmarkEventRate(b *testing.B) {
	testutil.RequireRoot(b, "loads eBPF programs")
	tr, err := Open(Options{PID: os.Getpid(), Path: PathSock})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	var got atomic.Uint64
	ctx, cancel := context.WithCancel(context.Background())
	readDone := make(chan struct{})
	go func() {
		tr.Read(ctx, func(io *events.IO) { got.Add(uint64(len(io.Markers))) })
		close(readDone)
	}()
	var buf []byte
	for i := 0; i < 32; i++ {
		buf = marker.Append(buf, uint64(i))
	}
	cfd, sfd := tcpPair(b)
	done := drain(sfd)
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		marker.Put(buf, uint64(i))
		if _, err := unix.Write(cfd, buf); err != nil {
			b.Fatal(err)
		}
	}
	unix.Shutdown(cfd, unix.SHUT_WR)
	<-done
	cancel()
	<-readDone
	b.StopTimer()
	secs := time.Since(start).Seconds()
	st, _ := tr.Stats()
	b.ReportMetric(float64(got.Load())/secs, "markers/s")
	b.ReportMetric(float64(st.DroppedMarkers), "dropped")
	if want := st.Markers[0] + st.Markers[1]; got.Load()+st.DroppedMarkers != want {
		b.Errorf("delivered %d + dropped %d != found %d", got.Load(), st.DroppedMarkers, want)
	}
}

func itoa(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return strconv.Itoa(n/1024) + "Ki"
	}
	return strconv.Itoa(n)
}

// BenchmarkFrames: the in-kernel cost per message of matching by frame
// next to matching by marker, on the same bytes: NATS MSG frames of 1 KiB
// payloads (random bytes, a marker in each), written one per call and 64
// per call (a broker's batched write), with the empty program's floor.
// The goal: frame at most 1.5× marker per message.
func BenchmarkFrames(b *testing.B) {
	testutil.RequireRoot(b, "loads eBPF programs")
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	for _, proto := range []frame.Proto{frame.NATS, frame.MQTT, frame.STOMP, frame.AMQP, frame.Redis} {
		for _, per := range []int{1, 64} {
			benchFrames(b, proto, per)
		}
	}
}

// benchFrames is BenchmarkFrames for one protocol and number of messages
// per write: the floor, then each mode.
func benchFrames(b *testing.B, proto frame.Proto, per int) {
	buf := benchMsgs[proto](per, 1024)
	name := "/" + proto.String() + "-" + itoa(per) + "-per-call"
	b.Run("floor"+name, func(b *testing.B) {
		progs, detach := floor(b, PathSock, floorHooks[PathSock])
		defer detach()
		writeLoop(b, buf, progs)
	})
	for _, m := range []Match{MatchMarker, MatchFrame} {
		b.Run(string(m)+name, func(b *testing.B) {
			r := openOwnRig(b, Options{Path: PathSock, Match: m}, proto)
			cfd, sfd := r.pair(b)
			if proto == frame.MQTT { // the writer reads a CONNECT: its level
				readConnect(b, sfd, cfd)
			}
			done := drain(sfd)
			st0, _ := r.c.tr.Stats()
			rt0, n0 := runStats(r.c.tr.Probe.Programs())
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for range b.N {
				if _, err := unix.Write(cfd, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			rt1, n1 := runStats(r.c.tr.Probe.Programs())
			unix.Close(cfd)
			<-done
			if n1 > n0 {
				b.ReportMetric(float64(rt1-rt0)/float64(n1-n0)/float64(per), "prog-ns/msg")
			}
			st, _ := r.c.tr.Stats()
			if st.Markers[1]-st0.Markers[1] < uint64(b.N*per) || st.Unscanned != st0.Unscanned {
				b.Errorf("%d records of %d messages written, %v unscanned; %+v", st.Markers[1]-st0.Markers[1], b.N*per, st.Unscanned, st.Frame)
			}
		})
	}
}

// readConnect has from write an MQTT CONNECT and to read it.
func readConnect(b *testing.B, from, to int) {
	connect := mqttConnect(4)
	if _, err := unix.Write(from, connect); err != nil {
		b.Fatal(err)
	}
	for got := 0; got < len(connect); {
		n, err := unix.Read(to, make([]byte, len(connect)-got))
		if err != nil || n == 0 {
			b.Fatalf("reading the CONNECT: %v", err)
		}
		got += n
	}
}

// benchMsgs are the messages of each protocol as a broker writes them.
var benchMsgs = map[frame.Proto]func(n, size int) []byte{
	frame.NATS: natsMsgs, frame.MQTT: mqttMsgs, frame.STOMP: stompMsgs, frame.AMQP: amqpMsgs, frame.Redis: redisMsgs,
}

// mqttMsgs is n MQTT 3.1.1 PUBLISH packets (QoS 0). The socket that
// writes them must have read a CONNECT first (see benchFrames): its level
// is what the parser of the writes takes.
func mqttMsgs(n, size int) []byte {
	var out []byte
	p := payload(size, "random")
	for i := range n {
		marker.Put(p[size/2:], uint64(i+1))
		out = append(out, mqttPublish(4, 0, "bench/topic", p, nil)...)
	}
	return out
}

// amqpMsgs is n basic.deliver contents (method, header, one body frame).
func amqpMsgs(n, size int) []byte {
	var out []byte
	p := payload(size, "random")
	args := slices.Concat(shortstr("amq.ctag-bench"), make([]byte, 9), shortstr(""), shortstr("bench.queue"))
	for i := range n {
		marker.Put(p[size/2:], uint64(i+1))
		out = append(out, amqpMessage(1, 60, args, nil, p, 131072)...)
	}
	return out
}

// redisMsgs is n pub/sub message pushes (RESP2).
func redisMsgs(n, size int) []byte {
	var out []byte
	p := payload(size, "random")
	for i := range n {
		marker.Put(p[size/2:], uint64(i+1))
		out = fmt.Appendf(out, "*3\r\n$7\r\nmessage\r\n$13\r\nbench.channel\r\n$%d\r\n", size)
		out = append(append(out, p...), "\r\n"...)
	}
	return out
}

// stompMsgs is n MESSAGE frames as ActiveMQ writes them, of size-byte
// random payloads, each with a marker.
func stompMsgs(n, size int) []byte {
	var out []byte
	p := payload(size, "random")
	for i := range n {
		marker.Put(p[size/2:], uint64(i+1))
		out = fmt.Appendf(out, "MESSAGE\ncontent-length:%d\nexpires:0\ndestination:/queue/bench\nsubscription:0\n"+
			"priority:4\nmessage-id:ID:host-40101-1790000000000-3:1:1:1:%d\ntimestamp:1790000000000\n\n", size, i+1)
		out = append(append(out, p...), 0)
	}
	return out
}

// natsMsgs is n MSG frames of size-byte random payloads, each with a marker.
func natsMsgs(n, size int) []byte {
	var out []byte
	p := payload(size, "random")
	for i := range n {
		marker.Put(p[size/2:], uint64(i+1))
		out = append(out, "MSG bench.subject 1 "+strconv.Itoa(size)+"\r\n"...)
		out = append(append(out, p...), "\r\n"...)
	}
	return out
}
