package record

import (
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/capture"
	"github.com/brokertrace/brokertrace/collect"
	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/probes/netstack"
	"github.com/brokertrace/brokertrace/probes/sched"
	"github.com/brokertrace/brokertrace/probes/sockq"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// flatSlack is the growth of the heap allowed from the first third of
// the run to the last: no per-message state is kept for the whole
// recording, only per-window state (a few hundred bytes per 100 ms window
// and source, some 30 KiB over the run) and the noise of what is in
// flight. Keeping the time of every message in and out, as the timeline
// once did, grows the heap by 16 bytes per message: 4.6 MiB and more over
// the 300 000 messages between the thirds.
const flatSlack = 2 << 20

// TestMemoryFlat records nats-server with every source on while 128-byte
// marked messages go through it at about 30 000 a second for 15 s, with
// --id-ttl 2s. The Go heap in use after a GC, sampled every half second,
// may not grow from the first third of the run to the last by more than
// flatSlack, median to median: ids in flight, the timeline, the switch
// history and every other per-message state level off. Medians, since
// rows waiting for a source's watermark make the heap jump by megabytes
// for a sample when that source's reader is held up a moment. (Without
// expiry the matcher alone grows by ~100 bytes per message; the timeline
// kept 16.)
func TestMemoryFlat(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	srv := testbroker.StartNATS(t)
	proc, err := process.ByPID(srv.PID())
	if err != nil {
		t.Fatal(err)
	}
	rec := startRecordingOf(t, proc, Config{Out: t.TempDir(), IDTTL: 2 * time.Second, Sources: allSources(t, proc)})
	var sent, received atomic.Int64
	stop := publish(t, srv.URL(), &sent, &received)
	const samples = 30
	heap := make([]uint64, samples)
	msgs := make([]int64, samples)
	for i := range samples {
		time.Sleep(500 * time.Millisecond)
		heap[i], msgs[i] = heapAfterGC(), sent.Load()
	}
	stop()
	res, rows := rec.stop(t)
	third := samples / 3
	first, last := median(heap[:third]), median(heap[samples-third:])
	n := msgs[samples-1] - msgs[third-1]
	bound := uint64(flatSlack)
	t.Logf("heap in use after GC (median): %.1f MiB in the first third, %.1f MiB in the last; %d messages between (%.0f/s), %d copies matched; samples %v",
		float64(first)/(1<<20), float64(last)/(1<<20), n, float64(n)/float64(samples-third)*2, res.Meta.Messages.Copies, heap)
	if n < 200_000 || res.Meta.Messages.Copies < uint64(received.Load())*9/10 {
		t.Fatalf("not the load meant: %d messages in the last two thirds, %d copies matched of %d received", n, res.Meta.Messages.Copies, received.Load())
	}
	if last > first+bound {
		t.Errorf("the heap grew by %.1f MiB, more than the %.1f MiB allowed: %v", float64(last-first)/(1<<20), float64(bound)/(1<<20), heap)
	}
	sameCounts(t, rec.dir, rows, res.Meta.Messages.InWithoutOut+res.Meta.Messages.Expired)
}

// window is a row of a source's time series: its messages in and out.
type window struct {
	from, to int64
	in, out  int
}

// sameCounts checks the messages the sources counted in each window
// (sched.csv, cpu.csv, net.csv), long after the timeline folded their
// times into counts, and cpu_per_msg.csv's every-N-th copy out, against a
// count over every row of messages.csv. Reads without a copy are in the
// timeline, not in messages.csv: noCopy of them may be missing.
func sameCounts(t *testing.T, dir string, rows []recfile.Message, noCopy uint64) {
	var ins, outs []int64
	for _, m := range rows {
		if m.Copy == 1 {
			ins = append(ins, m.TIn)
		}
		outs = append(outs, m.TOut)
	}
	slices.Sort(ins)
	slices.Sort(outs)
	between := func(ts []int64, from, to int64) int {
		a, _ := slices.BinarySearch(ts, from)
		b, _ := slices.BinarySearch(ts, to)
		return b - a
	}
	files := map[string][]window{
		recfile.SchedFile: windowsOf(t, dir, recfile.SchedFile, func(r *recfile.SchedRow) window { return window{r.TStart, r.TEnd, r.MsgsIn, r.MsgsOut} }),
		recfile.CPUFile:   windowsOf(t, dir, recfile.CPUFile, func(r *recfile.CPURow) window { return window{r.TStart, r.TEnd, r.MsgsIn, r.MsgsOut} }),
		recfile.NetFile:   windowsOf(t, dir, recfile.NetFile, func(r *recfile.NetRow) window { return window{r.TStart, r.TEnd, r.MsgsIn, r.MsgsOut} }),
	}
	for name, wins := range files {
		var missing uint64
		for _, w := range wins {
			in, out := between(ins, w.from, w.to), between(outs, w.from, w.to)
			missing += uint64(w.in - in)
			if w.out != out || w.in < in {
				t.Errorf("%s [%d, %d): %d in %d out, messages.csv has %d %d", name, w.from, w.to, w.in, w.out, in, out)
				return
			}
		}
		if len(wins) < 100 || missing > noCopy {
			t.Errorf("%s: %d windows, %d more messages in than messages.csv has (%d read without a copy)", name, len(wins), missing, noCopy)
		}
	}
	perMsg, err := recfile.ReadTable[recfile.CPUPerMsgRow](filepath.Join(dir, recfile.CPUPerMsgFile))
	if err != nil || len(perMsg) < 1000 {
		t.Fatalf("%s: %d rows, %v", recfile.CPUPerMsgFile, len(perMsg), err)
	}
	for _, r := range perMsg {
		if r.T != outs[r.N-1] {
			t.Fatalf("%s: copy %d left at %d, messages.csv says %d", recfile.CPUPerMsgFile, r.N, r.T, outs[r.N-1])
		}
	}
}

func windowsOf[T any](t *testing.T, dir, name string, win func(*T) window) []window {
	rows, err := recfile.ReadTable[T](filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	wins := make([]window, len(rows))
	for i := range rows {
		wins[i] = win(&rows[i])
	}
	return wins
}

// allSources makes every source with its default flags, as record does.
func allSources(t *testing.T, proc *process.Process) []source.Source {
	var srcs []source.Source
	for _, spec := range []source.Spec{capture.Spec(), netstack.Spec(), collect.Spec(), sched.Spec(), sockq.Spec()} {
		fl := pflag.NewFlagSet(spec.Name, pflag.ContinueOnError)
		spec.Flags(fl)
		if err := fl.Parse(nil); err != nil {
			t.Fatal(err)
		}
		src, err := spec.New(proc)
		if err != nil || src == nil {
			t.Fatalf("%s: %v", spec.Name, err)
		}
		srcs = append(srcs, src)
	}
	return srcs
}

// publish sends marked 128-byte messages, 300 every 10 ms, to a
// subscriber of its own until stop is called.
func publish(t *testing.T, url string, sent, received *atomic.Int64) (stop func()) {
	pub, err1 := nats.Connect(url)
	sub, err2 := nats.Connect(url)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	s, err := sub.Subscribe("bt.mem", func(*nats.Msg) { received.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	s.SetPendingLimits(-1, -1)
	sub.Flush()
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		body := make([]byte, 128)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for id := uint64(0x3e30000000); ; {
			select {
			case <-quit:
				pub.Flush()
				return
			case <-tick.C:
			}
			for range 300 {
				marker.Put(body[16:], id)
				id++
				pub.Publish("bt.mem", body)
			}
			sent.Add(300)
		}
	}()
	return func() {
		close(quit)
		<-done
		time.Sleep(500 * time.Millisecond)
		pub.Close()
		sub.Close()
	}
}

func median(xs []uint64) uint64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
