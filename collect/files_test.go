package collect

import (
	"bytes"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/brokertrace/brokertrace/internal/latefeed"

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
		busyPer: randBusy(rng, t),
	}
}

// randBusy is 0-3 CPUs' busy clocks read around t (some out of order).
func randBusy(rng *rand.Rand, t int64) map[int64]busyAt {
	per := map[int64]busyAt{}
	for id := range int64(rng.IntN(4)) {
		per[id] = busyAt{t + rng.Int64N(2e7) - 1e7, rng.Int64N(1e12)}
	}
	return per
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
		r := randReading(rng, ts)
		s.readings = append(s.readings, r)
		s.ends.add(r, s.kept, false)
		s.kept++
	}
	if err := s.createFiles(s.env); err != nil {
		t.Fatal(err)
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
		wantWin, wantPerMsg := oldWindows(s, tl), oldPerMsg(s, tl)
		if winErr, perMsgErr := s.closeFiles(tl); winErr != nil || perMsgErr != nil {
			t.Fatal(winErr, perMsgErr)
		}
		sameFile(t, i, s.env.Out.Join(recfile.CPUFile), wantWin)
		sameFile(t, i, s.env.Out.Join(recfile.CPUPerMsgFile), wantPerMsg)

		want := []byte("t_start_ns,t_end_ns,cpu,busy_util,user_util,nice_util,system_util,irq_util,softirq_util,iowait_util,steal_util,idle_util,busy_exact_util\n")
		for range rng.IntN(4) {
			s.perPrev, s.perLast = map[int64]cpuTimes{}, map[int64]cpuTimes{}
			s.busyPrev, s.busyLast = map[int64]busyAt{}, map[int64]busyAt{}
			for id := range int64(rng.IntN(6)) {
				s.perPrev[id], s.perLast[id+int64(rng.IntN(2))] = randReading(rng, 0).system, randReading(rng, 0).system
				if rng.IntN(3) > 0 {
					s.busyPrev[id], s.busyLast[id+int64(rng.IntN(2))] = busyAt{rng.Int64N(1e9), rng.Int64N(1e9)}, busyAt{rng.Int64N(2e9), rng.Int64N(2e9)}
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
func oldCores(prev, per map[int64]cpuTimes, busy0, busy map[int64]busyAt, t0, t int64) []byte {
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
		if okA && okZ && z.at > a.at {
			b = strconv.AppendFloat(b, float64(z.busy-a.busy)/float64(z.at-a.at), 'f', 6, 64)
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
		// The exact columns: each CPU's busy clock over its reader's
		// times, summed in the CPUs' order.
		exact := a.busyOK && z.busyOK && a.busyN == z.busyN
		var busy float64
		for _, id := range slices.Sorted(maps.Keys(z.busyPer)) {
			p, ok := a.busyPer[id]
			q := z.busyPer[id]
			exact = exact && ok && q.at > p.at
			busy += float64(q.busy-p.busy) / float64(q.at-p.at)
		}
		b = append(b, ',')
		if exact {
			b = strconv.AppendFloat(b, busy, 'f', 6, 64)
		}
		b = append(b, ',')
		if exact && bok {
			b = strconv.AppendFloat(b, busy-float64(b1-b0)/dt, 'f', 6, 64)
		}
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

// TestStreamedAsAtOnce: cpu.csv and cpu_per_msg.csv written as a
// recording's timeline folds, readings let go of on the way, are the same
// to the byte as written at the end from every reading and message time
// (the files before they were streamed), and the readings held stay a
// streamLag's worth whatever the recording's length.
func TestStreamedAsAtOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 20 {
		every := 1 + rng.IntN(20)
		srcs := []string{"cgroup", "schedstat", "stat"}
		brokerSrc, perMsgSrc := srcs[rng.IntN(3)], srcs[rng.IntN(3)]
		// 2000 readings 50–150 ms apart, each counter read 9 times in 10.
		var readings []reading
		ts := int64(1e9)
		for range 2000 {
			ts += 5e7 + rng.Int64N(1e8)
			r := randReading(rng, ts)
			r.cgOK, r.runOK, r.statOK, r.systemOK = rng.IntN(10) > 0, rng.IntN(10) > 0, rng.IntN(10) > 0, rng.IntN(10) > 0
			readings = append(readings, r)
		}
		// Messages over the readings' span but its first 20 s (before the
		// timeline folds anything), reaching the timeline half a second
		// after their time (a ring buffer read late).
		feed := latefeed.New(rng, 20000, 21e9, ts, 5e8)

		streamed := func() (*Source, int) {
			tl := feed.TL
			s := NewSource(Options{Every: every})
			s.env = &source.Env{Out: testutil.OutDir(t, t.TempDir()), Timeline: tl}
			s.brokerSrc, s.perMsgSrc = brokerSrc, perMsgSrc
			tl.KeepEvery(every)
			if err := s.createFiles(s.env); err != nil {
				t.Fatal(err)
			}
			most := 0
			for _, r := range readings {
				feed.Until(r.t)
				s.add(r, nil)
				s.stream(tl, tl.Settled(streamLag), false)
				most = max(most, len(s.readings))
			}
			feed.Rest()
			if winErr, perMsgErr := s.closeFiles(tl); winErr != nil || perMsgErr != nil {
				t.Fatal(winErr, perMsgErr)
			}
			return s, most
		}
		s, most := streamed()

		// The same at once, from every reading and a timeline of every
		// time.
		at := NewSource(Options{Every: every})
		at.env = &source.Env{Out: testutil.OutDir(t, t.TempDir())}
		at.brokerSrc, at.perMsgSrc = brokerSrc, perMsgSrc
		at.readings = readings
		tl := feed.AtOnce()
		sameFile(t, i, s.env.Out.Join(recfile.CPUFile), oldWindows(at, tl))
		sameFile(t, i, s.env.Out.Join(recfile.CPUPerMsgFile), oldPerMsg(at, tl))
		// streamLag (10 s) and the timeline's fold (up to two holds) are
		// about 105 readings here, and 256 more may wait to be let go of
		// at once: twice the first is allowed for the spacing's spread.
		if most > 2*105+256 {
			t.Fatalf("case %d: held up to %d readings of 2000", i, most)
		}
		if s.perMsg.rows == 0 {
			t.Fatalf("case %d: no cpu_per_msg.csv row", i)
		}
	}
}
