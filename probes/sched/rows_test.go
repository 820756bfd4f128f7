package sched

import (
	"bytes"
	"encoding/csv"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/source"
)

// TestRowsAsBefore writes sched.csv and threads.csv of made-up samples
// through the row types and compares them byte for byte with the files the
// writers made before the row types existed (encoding/csv, ratios 'f' 3
// and empty without messages, percentiles empty without windows).
func TestRowsAsBefore(t *testing.T) {
	ms := int64(time.Millisecond)
	th := func(tid int, comm string, vol, on, cpu uint64) ThreadStats {
		return ThreadStats{TID: tid, Comm: comm, Voluntary: vol, Involuntary: vol / 3, OnCPUNs: on, CPUNs: cpu, WaitNs: on / 7, PreemptWaitNs: 11}
	}
	snap := func(end int64, sw uint64, ts ...ThreadStats) Snapshot {
		s := Snapshot{End: end, Threads: map[int]ThreadStats{}, CPUs: []CPUStats{{Switches: sw}, {Switches: 2 * sw}}}
		for _, t := range ts {
			s.Threads[t.TID] = t
		}
		return s
	}
	s := &Source{
		env:     &source.Env{Out: testutil.OutDir(t, t.TempDir())},
		allowed: []int{0, 1},
		read:    map[uint32]int{10: 7},
		written: map[uint32]int{10: 5, 12: 1},
		samples: []Snapshot{
			snap(100*ms, 10, th(10, "broker", 1, 1000, 900)),
			snap(200*ms, 17, th(10, "broker", 4, 5000, 4321), th(11, "a, \"b\"", 2, 77, 70)),
			snap(300*ms, 23, th(10, "broker", 4, 5000, 4321), th(11, "a, \"b\"", 9, 1234567, 1234000)),
			snap(400*ms, 40, th(10, "broker", 13, 9999, 9876), th(11, "a, \"b\"", 9, 1234567, 1234000), th(12, " gc", 1, 3, 2)),
		},
	}
	tl := &source.Timeline{In: []int64{110 * ms, 150 * ms, 160 * ms, 250 * ms}, Out: []int64{120 * ms, 390 * ms}}
	threads := threadDeltas(s.samples[0], s.samples[len(s.samples)-1])
	if err := s.createFiles(); err != nil {
		t.Fatal(err)
	}
	if err := s.closeFiles(tl); err != nil {
		t.Fatal(err)
	}
	if err := s.writeThreads(tl, threads); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{SchedFile: oldSched(s, tl), ThreadsFile: oldThreads(s, tl, threads)} {
		got, err := os.ReadFile(s.env.Out.Join(name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs:\n%s\nwant:\n%s", name, got, want)
		}
	}
}

func oldRatio(x float64, n int) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatFloat(x/float64(n), 'f', 3, 64)
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }
func i64(v int64) string  { return strconv.FormatInt(v, 10) }

func oldCSV(header []string, rows [][]string) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write(header)
	w.WriteAll(rows)
	return b.Bytes()
}

func oldSched(s *Source, tl *source.Timeline) []byte {
	var rows [][]string
	for i := 1; i < len(s.samples); i++ {
		a, b := s.samples[i-1], s.samples[i]
		var vol, invol, on uint64
		for _, t := range threadDeltas(a, b) {
			vol += t.Voluntary
			invol += t.Involuntary
			on += t.OnCPUNs
		}
		cpus := s.cpuSwitches(a, b)
		in, out := tl.InBetween(a.End, b.End), tl.OutBetween(a.End, b.End)
		rows = append(rows, []string{i64(a.End), i64(b.End), strconv.Itoa(in), strconv.Itoa(out),
			u64(vol), u64(invol), u64(vol + invol), u64(cpus),
			oldRatio(float64(vol+invol), in), oldRatio(float64(cpus), in), u64(on), oldRatio(float64(on), in)})
	}
	return oldCSV([]string{
		"t_start_ns", "t_end_ns", "msgs_in", "msgs_out",
		"switches_voluntary", "switches_involuntary", "switches_target", "switches_cpus",
		"switches_per_msg_target", "switches_per_msg_cpus", "oncpu_ns", "oncpu_ns_per_msg",
	}, rows)
}

func oldThreads(s *Source, tl *source.Timeline, threads []ThreadStats) []byte {
	// The histograms as they were made at the end, from every window.
	perMsg := map[int]*hdrhistogram.Histogram{}
	for i := 1; i < len(s.samples); i++ {
		w := newWindow(s, s.samples[i-1], s.samples[i])
		in := tl.InBetween(w.start, w.end)
		if in == 0 {
			continue
		}
		for _, c := range w.cpu {
			h := perMsg[int(c.tid)]
			if h == nil {
				h = hdrhistogram.New(1, int64(time.Hour), 3)
				perMsg[int(c.tid)] = h
			}
			h.RecordValue(max(c.ns/int64(in), 0))
		}
	}
	var rows [][]string
	for _, t := range threads {
		h := perMsg[t.TID]
		p50, p90, p99, n := "", "", "", "0"
		if h != nil && h.TotalCount() > 0 {
			p50, p90, p99 = i64(h.ValueAtQuantile(50)), i64(h.ValueAtQuantile(90)), i64(h.ValueAtQuantile(99))
			n = i64(h.TotalCount())
		}
		rows = append(rows, []string{strconv.Itoa(t.TID), t.Comm, u64(t.Voluntary), u64(t.Involuntary), u64(t.OnCPUNs), u64(t.CPUNs),
			u64(t.WaitNs + t.PreemptWaitNs), strconv.Itoa(s.read[uint32(t.TID)]), strconv.Itoa(s.written[uint32(t.TID)]),
			oldRatio(float64(t.CPUNs), len(tl.In)), p50, p90, p99, n})
	}
	return oldCSV([]string{
		"tid", "comm", "switches_voluntary", "switches_involuntary", "oncpu_ns", "cpu_ns", "runq_wait_ns",
		"messages_read", "messages_written", "cpu_ns_per_msg", "cpu_ns_per_msg_p50", "cpu_ns_per_msg_p90",
		"cpu_ns_per_msg_p99", "windows",
	}, rows)
}
