package record

import (
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
	"github.com/brokertrace/brokertrace/source"
)

// memBytesPerMsg is the growth of the heap allowed per message: the
// timeline handed to the sources at the end keeps the time of every
// message in and every copy out (8 + 8 bytes), the only per-message state
// a recording keeps for its whole length; everything else must level off.
const memBytesPerMsg = 16 + 8

// TestMemoryFlat records nats-server with every source on while 128-byte
// marked messages go through it at about 30 000 a second for 15 s, with
// --id-ttl 2s. The Go heap in use after a GC, sampled every half second,
// may not grow from the first third of the run to the last by more than
// 8 MiB plus memBytesPerMsg per message in between: ids in flight and
// every other per-message state level off. (Without expiry the matcher
// alone grows by ~100 bytes per message.)
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
	res, _ := rec.stop(t)
	third := samples / 3
	first, last := slices.Max(heap[:third]), slices.Max(heap[samples-third:])
	n := msgs[samples-1] - msgs[third-1]
	bound := 8<<20 + memBytesPerMsg*uint64(n)
	t.Logf("heap in use after GC: %.1f MiB in the first third, %.1f MiB in the last; %d messages between (%.0f/s), %d copies matched",
		float64(first)/(1<<20), float64(last)/(1<<20), n, float64(n)/float64(samples-third)*2, res.Meta.Messages.Copies)
	if n < 200_000 || res.Meta.Messages.Copies < uint64(received.Load())*9/10 {
		t.Fatalf("not the load meant: %d messages in the last two thirds, %d copies matched of %d received", n, res.Meta.Messages.Copies, received.Load())
	}
	if last > first+bound {
		t.Fatalf("the heap grew by %.1f MiB, more than the %.1f MiB allowed: %v", float64(last-first)/(1<<20), float64(bound)/(1<<20), heap)
	}
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

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
