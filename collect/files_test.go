package collect

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// The three files are written through recfile's row types; these tests keep
// the hand-formatted writers they replaced, and check that for random
// readings the files are the same to the byte.

func randReading(rng *rand.Rand, t int64) reading {
	n := func() int64 { return rng.Int64N(1e12) - 1e10 }
	times := func() cpuTimes { return cpuTimes{n(), n(), n(), n(), n(), n(), n(), n()} }
	return reading{
		t: t, cg: usage{total: n(), user: n(), sys: n()}, cgOK: rng.IntN(4) > 0,
		run: n(), wait: n(), runOK: rng.IntN(4) > 0,
		user: n(), sys: n(), statOK: rng.IntN(4) > 0,
		system: times(), ncpu: rng.IntN(5), systemOK: rng.IntN(4) > 0,
		busy: n(), busyN: rng.IntN(3), busyOK: rng.IntN(4) > 0,
	}
}

// randSource is a source with random readings (some out of order), a random
// broker counter and a timeline of random messages.
func randSource(t *testing.T, rng *rand.Rand) (*Source, *source.Timeline) {
	srcs := []string{"cgroup", "schedstat", "stat", ""}
	s := NewSource(Options{Every: 1 + rng.IntN(20)})
	s.env = &source.Env{Out: testutil.OutDir(t, t.TempDir())}
	s.brokerSrc, s.perMsgSrc = srcs[rng.IntN(4)], srcs[rng.IntN(4)]
	ts := int64(1e9)
	for range rng.IntN(30) {
		ts += rng.Int64N(2e8) - 2e7
		s.readings = append(s.readings, randReading(rng, ts))
	}
	tl := &source.Timeline{}
	for range rng.IntN(3000) {
		tl.In = append(tl.In, 1e9+rng.Int64N(max(ts-1e9, 1)+1e8))
		tl.Out = append(tl.Out, 1e9+rng.Int64N(max(ts-1e9, 1)+1e8))
	}
	tl.Sort()
	return s, tl
}

func TestFilesAsBefore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		s, tl := randSource(t, rng)
		if err := s.writeWindows(tl); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.writePerMsg(tl); err != nil {
			t.Fatal(err)
		}
		sameFile(t, i, s.env.Out.Join(recfile.CPUFile), oldWindows(s, tl))
		sameFile(t, i, s.env.Out.Join(recfile.CPUPerMsgFile), oldPerMsg(s, tl))

		var err error
		if s.cores, err = recfile.CreateTable[recfile.CPUCoreRow](s.env.Out, recfile.CPUCoresFile); err != nil {
			t.Fatal(err)
		}
		want := []byte("t_start_ns,t_end_ns,cpu,busy_util,user_util,nice_util,system_util,irq_util,softirq_util,iowait_util,steal_util,idle_util,busy_exact_util\n")
		for range rng.IntN(4) {
			s.perPrev, s.perLast = map[int64]cpuTimes{}, map[int64]cpuTimes{}
			s.busyPrev, s.busyLast = map[int64]int64{}, map[int64]int64{}
			for id := range int64(rng.IntN(6)) {
				s.perPrev[id], s.perLast[id+int64(rng.IntN(2))] = randReading(rng, 0).system, randReading(rng, 0).system
				if rng.IntN(3) > 0 {
					s.busyPrev[id], s.busyLast[id+int64(rng.IntN(2))] = rng.Int64N(1e9), rng.Int64N(2e9)
				}
			}
			s.tPrev, s.tLast = rng.Int64N(1e9), rng.Int64N(2e9)
			want = append(want, oldCores(s.perPrev, s.perLast, s.busyPrev, s.busyLast, s.tPrev, s.tLast)...)
			s.flushCores()
		}
		if err := s.closeCores(); err != nil {
			t.Fatal(err)
		}
		sameFile(t, i, s.env.Out.Join(recfile.CPUCoresFile), want)
	}
}

func sameFile(t *testing.T, i int, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("case %d: %s differs from the hand-formatted file:\n%s\nwant\n%s", i, filepath.Base(path), got, want)
	}
}

// oldCores is flushCores before recfile.CPUCoreRow, with busy_exact_util
// added.
func oldCores(prev, per map[int64]cpuTimes, busy0, busy map[int64]int64, t0, t int64) []byte {
	var b []byte
	if prev == nil || per == nil || t <= t0 {
		return b
	}
	ids := make([]int64, 0, len(per))
	for id := range per {
		if _, ok := prev[id]; ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	dt := float64(t - t0)
	for _, id := range ids {
		d := per[id].sub(prev[id])
		b = strconv.AppendInt(b, t0, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, t, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, id, 10)
		for _, v := range []int64{d.busy(), d.user, d.nice, d.system, d.irq, d.softirq, d.iowait, d.steal, d.idle} {
			b = append(b, ',')
			b = strconv.AppendFloat(b, float64(v)/dt, 'f', 6, 64)
		}
		b = append(b, ',')
		a, okA := busy0[id]
		z, okZ := busy[id]
		if okA && okZ {
			b = strconv.AppendFloat(b, float64(z-a)/dt, 'f', 6, 64)
		}
		b = append(b, '\n')
	}
	return b
}

// oldWindows is writeWindows before recfile.CPURow.
func oldWindows(s *Source, tl *source.Timeline) []byte {
	b := []byte("t_start_ns,t_end_ns,msgs_in,msgs_out,broker_cgroup_util,broker_proc_util,broker_user_util,broker_sys_util," +
		"system_util,system_irq_util,system_softirq_util,system_minus_broker_util,cpu_ns_per_msg,system_util_frac," +
		"system_exact_util,system_minus_broker_exact_util\n")
	for i := 1; i < len(s.readings); i++ {
		a, z := &s.readings[i-1], &s.readings[i]
		if z.t <= a.t {
			continue
		}
		dt := float64(z.t - a.t)
		in, out := tl.InBetween(a.t, z.t), tl.OutBetween(a.t, z.t)
		b = strconv.AppendInt(b, a.t, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, z.t, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(in), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(out), 10)
		util := func(ok bool, d int64) {
			b = append(b, ',')
			if ok {
				b = strconv.AppendFloat(b, float64(d)/dt, 'f', 6, 64)
			}
		}
		cg := a.cgOK && z.cgOK
		run := a.runOK && z.runOK
		st := a.statOK && z.statOK
		sys := a.systemOK && z.systemOK
		util(cg, z.cg.total-a.cg.total)
		util(run, z.run-a.run)
		util(st, z.user-a.user)
		util(st, z.sys-a.sys)
		d := z.system.sub(a.system)
		util(sys, d.busy())
		util(sys, d.irq)
		util(sys, d.softirq)
		b0, ok0 := a.brokerNs(s.brokerSrc)
		b1, ok1 := z.brokerNs(s.brokerSrc)
		bok := ok0 && ok1
		util(sys && bok, d.busy()-(b1-b0))
		b = append(b, ',')
		if bok && in > 0 {
			b = strconv.AppendFloat(b, float64(b1-b0)/float64(in), 'f', 1, 64)
		}
		b = append(b, ',')
		if sys && z.ncpu > 0 {
			b = strconv.AppendFloat(b, float64(d.busy())/dt/float64(z.ncpu), 'f', 6, 64)
		}
		exact := a.busyOK && z.busyOK && a.busyN == z.busyN
		util(exact, z.busy-a.busy)
		util(exact && bok, z.busy-a.busy-(b1-b0))
		b = append(b, '\n')
	}
	return b
}

// oldPerMsg is writePerMsg before recfile.CPUPerMsgRow.
func oldPerMsg(s *Source, tl *source.Timeline) []byte {
	b := []byte("n,t_ns,cpu_ns,c_n\n")
	var ts, us []int64
	for i := range s.readings {
		if v, ok := s.readings[i].brokerNs(s.perMsgSrc); ok {
			ts = append(ts, s.readings[i].t)
			us = append(us, v)
		}
	}
	havePrev := false
	var prevT, prevU int64
	for n := s.opts.Every; n <= len(tl.Out); n += s.opts.Every {
		t := tl.Out[n-1]
		if len(ts) < 2 || t < ts[0] || t > ts[len(ts)-1] {
			continue
		}
		k := sort.Search(len(ts), func(i int) bool { return ts[i] > t }) - 1
		u := us[k]
		if k+1 < len(ts) {
			u += int64(math.Round(float64(us[k+1]-us[k]) * float64(t-ts[k]) / float64(ts[k+1]-ts[k])))
		}
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, t, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, u-us[0], 10)
		b = append(b, ',')
		if havePrev && t > prevT {
			b = strconv.AppendFloat(b, float64(u-prevU)/float64(t-prevT), 'f', 6, 64)
		}
		b = append(b, '\n')
		havePrev, prevT, prevU = true, t, u
	}
	return b
}
