package collect

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// The CPU source is tested against the kernel: a CPU-burning process in a
// cgroup of its own, read through the cgroup, /proc/PID/stat, schedstat and
// /proc/stat, whose figures must agree with each other.

func TestMain(m *testing.M) {
	RunShim() // Group.Start on v1 re-executes this test binary as its shim
	if runSpin() {
		os.Exit(0) // TestExactBusy's child
	}
	os.Exit(m.Run())
}

// newGroup creates a group that the test removes at cleanup.
func newGroup(t *testing.T, opts GroupOptions) *Group {
	t.Helper()
	g, err := NewGroup(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Delete(); err != nil {
			t.Errorf("delete: %v", err)
		}
		for _, d := range g.Dirs {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("cgroup directory %s left behind", d)
			}
		}
	})
	return g
}

// startBusy starts a single-threaded CPU burner, in g unless g is nil.
func startBusy(t *testing.T, g *Group) *process.Process {
	t.Helper()
	cmd := exec.Command("sha256sum", "/dev/zero")
	var err error
	if g != nil {
		err = g.Start(cmd)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	proc, err := process.ByPID(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if proc.Comm != "sha256sum" {
		t.Fatalf("target comm %q: Start returned before exec", proc.Comm)
	}
	return proc
}

// recording is what a run of the source left.
type recording struct {
	dir     string
	res     source.Result
	meta    CPUMeta
	windows []map[string]string
	perMsg  []map[string]string
	cores   []map[string]string
	tl      *source.Timeline
}

// runSource runs the source over proc for n windows of 100 ms. The
// timeline has a message leaving (and entering) every millisecond.
func runSource(t *testing.T, proc *process.Process, opts Options, n int) *recording {
	t.Helper()
	dir := t.TempDir()
	src := NewSource(opts)
	env := &source.Env{Target: proc, Out: testutil.OutDir(t, dir), Start: monotime.Now(), Window: 100 * time.Millisecond}
	if err := src.Start(env); err != nil {
		t.Fatalf("start: %v", err)
	}
	begin := monotime.Now()
	for range n {
		time.Sleep(100 * time.Millisecond)
		src.Sample(monotime.Now())
	}
	src.Sample(monotime.Now())
	end := monotime.Now()
	if err := src.Drain(); err != nil {
		t.Fatal(err)
	}
	tl := &source.Timeline{}
	for ts := begin - int64(50*time.Millisecond); ts < end+int64(50*time.Millisecond); ts += int64(time.Millisecond) {
		tl.In = append(tl.In, ts)
		tl.Out = append(tl.Out, ts+1000)
	}
	res, err := src.Finish(tl)
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	r := &recording{dir: dir, res: res, tl: tl}
	b, _ := json.Marshal(res.Meta)
	if err := json.Unmarshal(b, &r.meta); err != nil {
		t.Fatal(err)
	}
	r.windows = testutil.ReadCSVMaps(t, filepath.Join(dir, recfile.CPUFile))
	r.perMsg = testutil.ReadCSVMaps(t, filepath.Join(dir, recfile.CPUPerMsgFile))
	r.cores = testutil.ReadCSVMaps(t, filepath.Join(dir, recfile.CPUCoresFile))
	// The last reading, right after the one before, replaces it.
	if len(r.windows) != r.meta.Samples-1 || r.meta.Samples != n+1 || r.meta.Reads != n+2 {
		t.Fatalf("%d windows from %d samples (%d reads), want %d samples", len(r.windows), r.meta.Samples, r.meta.Reads, n+1)
	}
	return r
}

func num(t *testing.T, row map[string]string, col string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(row[col], 64)
	if err != nil {
		t.Fatalf("column %s: %q: %v (row %v)", col, row[col], err, row)
	}
	return v
}

// checkBusy checks a recording of one busy thread in its own cgroup.
func checkBusy(t *testing.T, r *recording, version, path string) {
	t.Helper()
	m := r.meta
	if m.Cgroup.Version != version || m.Cgroup.Path != path || m.Cgroup.OtherProcesses != 0 || len(m.Missing) != 0 ||
		m.BrokerCPUSource != "cgroup" || m.PerMsgSource != "schedstat" {
		t.Fatalf("meta: %+v", m)
	}
	tot := m.Totals
	cg, run, wait := float64(*tot.CgroupNs), float64(*tot.SchedstatNs), float64(*tot.SchedstatWaitNs)
	statNs := float64(*tot.StatUserNs + *tot.StatSysNs)
	dur := float64(tot.DurationNs)
	t.Logf("%.2fs: cgroup %.1fms schedstat %.1fms (+%.1fms waiting) stat %.1fms system %.1fms of %d CPUs",
		dur/1e9, cg/1e6, run/1e6, wait/1e6, statNs/1e6, float64(*tot.SystemBusyNs)/1e6, m.CPUs)
	// The cgroup and the thread's scheduler counters are the same clock
	// (sum_exec_runtime); they differ only by when each was last updated.
	if math.Abs(cg-run) > 0.02*run {
		t.Errorf("cgroup %.0f ns and schedstat %.0f ns differ by more than 2%%", cg, run)
	}
	// /proc/PID/stat is the same time rounded to 10 ms ticks.
	if math.Abs(statNs-run) > 0.02*run+3*tickNs {
		t.Errorf("stat %.0f ns and schedstat %.0f ns differ by more than 2%% + 3 ticks", statNs, run)
	}
	// A thread that never blocks is either running or waiting for a CPU:
	// run + wait is the whole time, whatever else loads the machine.
	if f := (run + wait) / dur; f < 0.95 || f > 1.03 {
		t.Errorf("run+wait is %.3f of the time, want 1", f)
	}
	// The system's busy time includes the burner (to /proc/stat's ticks).
	if sys := float64(*tot.SystemBusyNs); sys < cg-float64(m.CPUs)*2*tickNs {
		t.Errorf("system busy %.0f ns < broker %.0f ns", sys, cg)
	}
	if *tot.SystemMinusNs != *tot.SystemBusyNs-*tot.CgroupNs {
		t.Errorf("system_minus_broker_ns %d != %d - %d", *tot.SystemMinusNs, *tot.SystemBusyNs, *tot.CgroupNs)
	}
	exact := m.ExactBusySource != ""
	if exact {
		// The exact busy time holds the burner's, to the cgroup counter's
		// update lag (a tick) at each end.
		if sys := float64(*tot.SystemExactNs); sys < cg-2*tickNs {
			t.Errorf("exact system busy %.0f ns < broker %.0f ns", sys, cg)
		}
		if *tot.SystemMinusExactNs != *tot.SystemExactNs-*tot.CgroupNs {
			t.Errorf("system_minus_broker_exact_ns %d != %d - %d", *tot.SystemMinusExactNs, *tot.SystemExactNs, *tot.CgroupNs)
		}
	} else {
		t.Logf("no exact busy time: %s", m.ExactBusyMissing)
	}

	var sumIn, sumOut int
	var utilSum, timeSum float64
	for _, w := range r.windows {
		a, z := int64(num(t, w, "t_start_ns")), int64(num(t, w, "t_end_ns"))
		if z-a < int64(25*time.Millisecond) {
			t.Errorf("window %v shorter than a quarter window", w)
		}
		in, out := int(num(t, w, "msgs_in")), int(num(t, w, "msgs_out"))
		if in != r.tl.InBetween(a, z) || out != r.tl.OutBetween(a, z) {
			t.Fatalf("window %v: messages %d/%d, timeline says %d/%d", w, in, out, r.tl.InBetween(a, z), r.tl.OutBetween(a, z))
		}
		sumIn += in
		sumOut += out
		u := num(t, w, "broker_cgroup_util")
		// One thread cannot use more than one CPU; but the cgroup's
		// counter leaves out the running thread's time since its last
		// update (at most a scheduler tick, no longer than a USER_HZ tick
		// for HZ >= 100), and each reading's time is the middle of a read
		// of at most 1 ms: a window can show up to that much more.
		if limit := 1 + (tickNs+1e6)/float64(z-a); u < 0 || u > limit {
			t.Errorf("window %v: cgroup utilisation %.3f of one CPU, over %.3f", w, u, limit)
		}
		utilSum += u * float64(z-a)
		timeSum += float64(z - a)
		if p := num(t, w, "broker_proc_util"); math.Abs(p-u) > 0.1 {
			t.Errorf("window %v: proc utilisation %.3f vs cgroup %.3f", w, p, u)
		}
		sys := num(t, w, "system_util")
		if d := num(t, w, "system_minus_broker_util") - (sys - u); math.Abs(d) > 2e-6 {
			t.Errorf("window %v: system_minus_broker_util != system_util - broker_cgroup_util", w)
		}
		if f := num(t, w, "system_util_frac"); math.Abs(f*float64(m.CPUs)-sys) > 1e-5 {
			t.Errorf("window %v: system_util_frac %.6f * %d CPUs != system_util %.6f", w, f, m.CPUs, sys)
		}
		if exact {
			e := num(t, w, "system_exact_util")
			if e < u-(tickNs+1e6)/float64(z-a) {
				t.Errorf("window %v: exact system busy %.6f < broker %.6f", w, e, u)
			}
			if d := num(t, w, "system_minus_broker_exact_util") - (e - u); math.Abs(d) > 2e-6 {
				t.Errorf("window %v: system_minus_broker_exact_util != system_exact_util - broker_cgroup_util", w)
			}
		}
		if in > 0 {
			want := u * float64(z-a) / float64(in)
			// want is from the utilisation rounded to 6 decimals.
			if got := num(t, w, "cpu_ns_per_msg"); math.Abs(got-want) > 0.1+1e-6*float64(z-a)/float64(in) {
				t.Errorf("window %v: cpu_ns_per_msg %.1f, want %.1f", w, got, want)
			}
		}
	}
	first, last := int64(num(t, r.windows[0], "t_start_ns")), int64(num(t, r.windows[len(r.windows)-1], "t_end_ns"))
	if sumIn != r.tl.InBetween(first, last) || sumOut != r.tl.OutBetween(first, last) || sumIn < 900 {
		t.Errorf("windows count %d in / %d out, timeline %d / %d", sumIn, sumOut, r.tl.InBetween(first, last), r.tl.OutBetween(first, last))
	}

	// cpu_per_msg.csv: every Every-th message within the readings.
	every := m.Every
	var want []int
	for n := every; n <= len(r.tl.Out); n += every {
		if ts := r.tl.Out[n-1]; ts >= first && ts <= last {
			want = append(want, n)
		}
	}
	if len(r.perMsg) != len(want) || m.PerMsgRows != len(want) || m.PerMsgSkipped != len(r.tl.Out)/every-len(want) {
		t.Fatalf("cpu_per_msg.csv has %d rows (meta %d, skipped %d), want %d", len(r.perMsg), m.PerMsgRows, m.PerMsgSkipped, len(want))
	}
	prev := -1.0
	var cnSum float64
	for i, row := range r.perMsg {
		n := int(num(t, row, "n"))
		if n != want[i] || int64(num(t, row, "t_ns")) != r.tl.Out[n-1] {
			t.Fatalf("row %d: %v, want n=%d t=%d", i, row, want[i], r.tl.Out[want[i]-1])
		}
		u := num(t, row, "cpu_ns")
		if u < prev {
			t.Fatalf("cpu_ns went backwards at row %v", row)
		}
		prev = u
		if i == 0 {
			if row["c_n"] != "" {
				t.Fatalf("first c_n %q, want empty", row["c_n"])
			}
			continue
		}
		c := num(t, row, "c_n")
		if c < 0 || c > 1.1 {
			t.Errorf("c_n %.3f of one CPU at %v", c, row)
		}
		cnSum += c
	}
	cnMean, utilMean := cnSum/float64(len(r.perMsg)-1), utilSum/timeSum
	if math.Abs(cnMean-utilMean) > 0.1 {
		t.Errorf("mean C_n %.3f, mean window utilisation %.3f", cnMean, utilMean)
	}
	t.Logf("mean utilisation %.3f of one CPU, mean C_n %.3f", utilMean, cnMean)

	// cpu_cores.csv: every CPU in every window.
	if len(r.cores) != len(r.windows)*m.CPUs {
		t.Fatalf("cpu_cores.csv has %d rows, want %d windows x %d CPUs", len(r.cores), len(r.windows), m.CPUs)
	}
	// /proc/stat's total line is the sum of its CPU lines, though the
	// kernel reads them one after the other: a tick apart. (A single CPU's
	// window can exceed 1.0 on a virtual machine, whose ticks catch up
	// after the hypervisor stalled it.)
	busy, busyExact := map[string]float64{}, map[string]float64{}
	for i, row := range r.cores {
		w := r.windows[i/m.CPUs]
		if row["t_start_ns"] != w["t_start_ns"] || row["t_end_ns"] != w["t_end_ns"] || row["cpu"] != strconv.Itoa(i%m.CPUs) {
			t.Fatalf("cpu_cores.csv row %d %v does not match window %v", i, row, w)
		}
		b := num(t, row, "busy_util")
		if b < 0 {
			t.Errorf("CPU %s busy %.3f", row["cpu"], b)
		}
		busy[w["t_start_ns"]] += b
		if exact {
			busyExact[w["t_start_ns"]] += num(t, row, "busy_exact_util")
		}
	}
	for _, w := range r.windows {
		dt := num(t, w, "t_end_ns") - num(t, w, "t_start_ns")
		if b := busy[w["t_start_ns"]]; math.Abs(b-num(t, w, "system_util")) > 2*float64(m.CPUs)*tickNs/dt+1e-5 {
			t.Errorf("window %v: CPUs' busy_util add up to %.6f", w, b)
		}
		// The exact columns are one reading each: the sum is to rounding.
		if b := busyExact[w["t_start_ns"]]; exact && math.Abs(b-num(t, w, "system_exact_util")) > float64(m.CPUs)*1e-6 {
			t.Errorf("window %v: CPUs' busy_exact_util add up to %.6f", w, b)
		}
	}
}

// TestBusyCgroup: the host's default cgroup version (v1 cpuacct on a hybrid
// or legacy host).
func TestBusyCgroup(t *testing.T) {
	testutil.RequireRoot(t, "creates cgroups and reads the target's /proc files")
	g := newGroup(t, GroupOptions{})
	proc := startBusy(t, g)
	r := runSource(t, proc, Options{Every: 50}, 10)
	checkBusy(t, r, g.Version, g.Path)
	if !strings.Contains(r.res.Summary, "cgroup "+g.Version+" "+g.Path) {
		t.Errorf("summary %q", r.res.Summary)
	}
	if g.Version != "v1" {
		return
	}
	// A v1 hierarchy mounted under another name than "cpuacct" (the usual
	// co-mounted "cpu,cpuacct") reads the same.
	h := discover("").cpuacct
	alias := filepath.Join(t.TempDir(), "cpu,cpuacct")
	if err := os.Symlink(h.mount, alias); err != nil {
		t.Fatal(err)
	}
	a, _ := h.dir(g.Path)
	before, err := newV1Reader(h, a).read()
	if err != nil {
		t.Fatal(err)
	}
	ah := &hierarchy{mount: alias, root: "/"}
	ad, _ := ah.dir(g.Path)
	after, err := newV1Reader(ah, ad).read()
	if err != nil || after.total < before.total || after.total > before.total+int64(time.Second) {
		t.Fatalf("through %s: %+v (%v), directly %+v", alias, after, err, before)
	}
}

// TestBusyCgroupV2: a cgroup2 group, read through cpu.stat (on a hybrid
// host in the unified hierarchy, where the target's v1 cgroup is the root).
func TestBusyCgroupV2(t *testing.T) {
	testutil.RequireRoot(t, "creates cgroups and reads the target's /proc files")
	if discover("").unified == nil {
		testutil.Skipf(t, "no cgroup2 hierarchy")
	}
	g := newGroup(t, GroupOptions{version: "v2"})
	proc := startBusy(t, g)
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", proc.PID))
	if !strings.Contains(string(b), "0::"+g.Path+"\n") {
		t.Fatalf("/proc/%d/cgroup:\n%s", proc.PID, b)
	}
	r := runSource(t, proc, Options{Every: 50}, 10)
	checkBusy(t, r, "v2", g.Path)
}

// TestPinned: --cpus puts the process on those CPUs only.
func TestPinned(t *testing.T) {
	testutil.RequireRoot(t, "creates cgroups and reads the target's /proc files")
	cpu := "0"
	if n := strings.TrimSpace(hostCPUs()); n != "0" {
		cpu = "1"
	}
	g := newGroup(t, GroupOptions{CPUs: cpu})
	proc := startBusy(t, g)
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", proc.PID))
	if !strings.Contains(string(status), "Cpus_allowed_list:\t"+cpu+"\n") {
		t.Fatalf("status:\n%s", status)
	}
	cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", proc.PID))
	if g.Version == "v1" && !strings.Contains(string(cg), ":cpuset:"+g.Path+"\n") {
		t.Fatalf("/proc/%d/cgroup:\n%s", proc.PID, cg)
	}
	r := runSource(t, proc, Options{}, 5)
	// The pinned burner's CPU was busy at least as long as the burner ran
	// (to /proc/stat's ticks).
	var busy float64
	for _, row := range r.cores {
		if row["cpu"] == cpu {
			busy += num(t, row, "busy_util") * (num(t, row, "t_end_ns") - num(t, row, "t_start_ns"))
		}
	}
	if ran := float64(*r.meta.Totals.CgroupNs); busy < ran-3*tickNs {
		t.Errorf("CPU %s busy %.1f ms < burner's %.1f ms", cpu, busy/1e6, ran/1e6)
	}
	// Exactly: to the cgroup counter's update lag (a scheduler tick, at
	// most a USER_HZ tick) at each end.
	if r.meta.ExactBusySource == "" {
		return
	}
	var exact float64
	for _, row := range r.cores {
		if row["cpu"] == cpu {
			exact += num(t, row, "busy_exact_util") * (num(t, row, "t_end_ns") - num(t, row, "t_start_ns"))
		}
	}
	t.Logf("CPU %s: exact busy %.3f ms, burner %.3f ms, recording %.3f ms", cpu, exact/1e6, float64(*r.meta.Totals.CgroupNs)/1e6, float64(r.meta.Totals.DurationNs)/1e6)
	// A reader pinned to the burner's CPU waits for its turn (at most a
	// scheduler slice, 3 ms) at each reading: its span can be that longer.
	if ran := float64(*r.meta.Totals.CgroupNs); exact < ran-2*tickNs || exact > float64(r.meta.Totals.DurationNs)+6e6 {
		t.Errorf("CPU %s exact busy %.1f ms, burner's %.1f ms, over %.1f ms", cpu, exact/1e6, ran/1e6, float64(r.meta.Totals.DurationNs)/1e6)
	}
}

// TestGroupKillsLeftovers: Delete kills what the broker left in the group
// (a child that outlived it) and removes the directories.
func TestGroupKillsLeftovers(t *testing.T) {
	testutil.RequireRoot(t, "creates cgroups and reads the target's /proc files")
	g, err := NewGroup(GroupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & echo $!")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(cmd); err != nil {
		g.Delete()
		t.Fatal(err)
	}
	var child int
	fmt.Fscan(out, &child)
	cmd.Wait()
	if child == 0 || !alive(child) {
		g.Delete()
		t.Fatalf("no orphan child (%d)", child)
	}
	if pids, _ := g.Procs(); len(pids) != 1 || pids[0] != child {
		g.Delete()
		t.Fatalf("group holds %v, want [%d]", pids, child)
	}
	if err := g.Delete(); err != nil {
		t.Fatal(err)
	}
	for _, d := range g.Dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left behind", d)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(child) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(child) {
		t.Errorf("orphan %d survived Delete", child)
	}
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// TestStartErrors: a program that cannot be executed is reported, and
// nothing is left running in the group.
func TestStartErrors(t *testing.T) {
	testutil.RequireRoot(t, "creates cgroups and reads the target's /proc files")
	for _, version := range []string{"v1", "v2"} {
		t.Run(version, func(t *testing.T) {
			l := discover("")
			if (version == "v1" && l.cpuacct == nil) || (version == "v2" && l.unified == nil) {
				testutil.Skipf(t, "no %s", version)
			}
			g := newGroup(t, GroupOptions{version: version})
			bad := filepath.Join(t.TempDir(), "not-a-program")
			os.WriteFile(bad, []byte("\x00\x01garbage"), 0o755)
			err := g.Start(exec.Command(bad))
			if err == nil || !strings.Contains(err.Error(), "exec format error") {
				t.Fatalf("start %s: %v, want exec format error", bad, err)
			}
			if pids, err := g.Procs(); err != nil || len(pids) != 0 {
				t.Fatalf("group holds %v (%v)", pids, err)
			}
			if err := g.Start(exec.Command("no-such-program-xyz")); err == nil || !strings.Contains(err.Error(), "executable file not found") {
				t.Fatalf("start missing program: %v", err)
			}
		})
	}
}

// TestBadCPUs: a CPU list the kernel refuses is ErrBadCPUs and leaves no
// cgroup behind.
func TestBadCPUs(t *testing.T) {
	testutil.RequireRoot(t, "creates cgroups and reads the target's /proc files")
	_, err := NewGroup(GroupOptions{CPUs: "4095"})
	if err == nil || !strings.Contains(err.Error(), "4095") || !strings.Contains(err.Error(), hostCPUs()) {
		t.Fatalf("err %v", err)
	}
	if _, err := NewGroup(GroupOptions{CPUs: "x"}); err == nil {
		t.Fatal("CPU list x accepted")
	}
	l := discover("")
	for _, h := range []*hierarchy{l.cpuacct, l.unified} {
		if h == nil {
			continue
		}
		entries, _ := os.ReadDir(filepath.Join(h.mount, GroupParent))
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), fmt.Sprintf("run-%d-", os.Getpid())) {
				t.Errorf("left behind: %s", filepath.Join(h.mount, GroupParent, e.Name()))
			}
		}
	}
}

// TestCgroupMissing: when the cgroup cannot be read the recording goes on
// with /proc, and meta.json says what is missing.
func TestCgroupMissing(t *testing.T) {
	testutil.RequireRoot(t, "creates cgroups and reads the target's /proc files")
	proc := startBusy(t, nil) // in the test's own (root) cgroups
	empty := t.TempDir()
	for _, c := range []struct {
		name string
		opts Options
		says []string
		mode string
	}{
		{"bogus path", Options{cgroupPath: "/no/such/cgroup"}, []string{"/no/such/cgroup", "no such file"}, ""},
		{"no controllers", Options{cgroupRoot: empty}, []string{"no v1 cpuacct hierarchy and no cgroup2 cpu.stat", empty}, "none"},
		{"root cgroup", Options{}, []string{"root", "brokertrace run"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "root cgroup" {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", proc.PID)); !strings.Contains(string(b), "cpuacct:/\n") && !strings.HasSuffix(string(b), "0::/\n") {
					testutil.Skipf(t, "the test does not run in the root cgroup:\n%s", b)
				}
			}
			r := runSource(t, proc, c.opts, 3)
			m := r.meta
			if len(m.Missing) != 1 || m.Cgroup.Version != "" || m.BrokerCPUSource != "schedstat" || m.Totals.CgroupNs != nil {
				t.Fatalf("meta %+v", m)
			}
			for _, s := range c.says {
				if !strings.Contains(m.Missing[0], s) {
					t.Errorf("missing %q does not say %q", m.Missing[0], s)
				}
			}
			if c.mode != "" && m.Cgroup.HostMode != c.mode {
				t.Errorf("host mode %q, want %q", m.Cgroup.HostMode, c.mode)
			}
			if len(r.res.Warnings) == 0 || r.res.Warnings[0] != m.Missing[0] {
				t.Errorf("warnings %q", r.res.Warnings)
			}
			for _, w := range r.windows {
				if w["broker_cgroup_util"] != "" {
					t.Fatalf("cgroup utilisation %q without a cgroup", w["broker_cgroup_util"])
				}
				p, sys := num(t, w, "broker_proc_util"), num(t, w, "system_util")
				if math.Abs(num(t, w, "system_minus_broker_util")-(sys-p)) > 2e-6 {
					t.Fatalf("window %v: system_minus_broker_util is not system - proc", w)
				}
			}
			if *m.Totals.SchedstatNs <= 0 || m.Totals.SystemBusyNs == nil || len(r.perMsg) == 0 {
				t.Fatalf("totals %+v, %d per-message rows", m.Totals, len(r.perMsg))
			}
		})
	}
}

// TestTargetExits: the target exiting mid-recording leaves the windows
// after it empty, without failing or warning, and the readings before it
// intact.
func TestTargetExits(t *testing.T) {
	testutil.RequireRoot(t, "creates cgroups and reads the target's /proc files")
	cmd := exec.Command("sha256sum", "/dev/zero")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	proc, err := process.ByPID(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	src := NewSource(Options{})
	dir := t.TempDir()
	if err := src.Start(&source.Env{Target: proc, Out: testutil.OutDir(t, dir), Window: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	src.Sample(0)
	cmd.Process.Kill()
	cmd.Wait()
	src.Sample(0) // dropped when within a quarter window of the last one
	time.Sleep(100 * time.Millisecond)
	src.Sample(0)
	src.Drain()
	res, err := src.Finish(&source.Timeline{})
	if err != nil {
		t.Fatal(err)
	}
	w := testutil.ReadCSVMaps(t, filepath.Join(dir, recfile.CPUFile))
	m := res.Meta.(CPUMeta)
	if m.Failures["stat"] != 2 || m.Reads != 4 || m.Samples != len(w)+1 || len(w) < 2 || w[0]["broker_proc_util"] == "" {
		t.Fatalf("failures %v, %d reads, %d samples; windows %v", m.Failures, m.Reads, m.Samples, w)
	}
	for _, row := range w[1:] {
		if row["broker_proc_util"] != "" || row["system_util"] == "" {
			t.Fatalf("window after the exit: %v", row)
		}
	}
	for _, warning := range res.Warnings {
		if strings.Contains(warning, "could not be read") {
			t.Fatalf("warning %q for the readings after the target exited", warning)
		}
	}
}

// TestReadingGaps: a reading less than a quarter window after the last one
// replaces it when it has every counter the last one had, else it is
// dropped; cpu_cores.csv follows the readings kept.
func TestReadingGaps(t *testing.T) {
	s := NewSource(Options{})
	s.minGap = 25
	dir := t.TempDir()
	var err error
	if s.cores, err = recfile.CreateTable[recfile.CPUCoreRow](testutil.OutDir(t, dir), recfile.CPUCoresFile); err != nil {
		t.Fatal(err)
	}
	full := func(ts int64, busy int64) (reading, map[int64]cpuTimes) {
		return reading{t: ts, runOK: true, statOK: true, systemOK: true, ncpu: 1},
			map[int64]cpuTimes{0: {user: busy, idle: ts - busy}}
	}
	for _, step := range []struct {
		t, busy int64
		partial bool
	}{{0, 0, false}, {100, 50, false}, {110, 60, false}, {115, 0, true}, {200, 100, false}, {210, 110, false}} {
		r, per := full(step.t, step.busy)
		if step.partial {
			r.runOK, r.statOK = false, false
		}
		s.add(r, per)
	}
	if err := s.closeCores(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(dir, recfile.CPUCoresFile))
	if err != nil {
		t.Fatal(err)
	}
	_, rows, _ := strings.Cut(string(file), "\n") // the rows after the header
	var ts []int64
	for _, r := range s.readings {
		ts = append(ts, r.t)
	}
	if fmt.Sprint(ts) != "[0 110 210]" {
		t.Fatalf("readings at %v, want [0 110 210]", ts)
	}
	want := "0,110,0,0.545455,0.545455,0.000000,0.000000,0.000000,0.000000,0.000000,0.000000,0.454545,\n" +
		"110,210,0,0.500000,0.500000,0.000000,0.000000,0.000000,0.000000,0.000000,0.000000,0.500000,\n"
	if rows != want {
		t.Fatalf("cpu_cores.csv rows:\n%s\nwant:\n%s", rows, want)
	}
}

// TestGroupQuota: a quota is written as the kernel takes it (µs over the
// period: cpu.cfs_quota_us and cpu.cfs_period_us on v1, cpu.max on
// cgroup2), and one below the kernel's 1 ms is ErrBadQuota before any
// cgroup is made.
func TestGroupQuota(t *testing.T) {
	testutil.RequireRoot(t, "creates cgroups")
	g := newGroup(t, GroupOptions{Quota: 0.25, Period: 10 * time.Millisecond})
	if g.Quota != 0.25 || g.Period != 10*time.Millisecond {
		t.Errorf("group quota %v over %v", g.Quota, g.Period)
	}
	var got []string
	for _, d := range g.Dirs {
		for _, f := range []string{"cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.max"} {
			if b, err := os.ReadFile(filepath.Join(d, f)); err == nil {
				got = append(got, f+"="+strings.TrimSpace(string(b)))
			}
		}
	}
	want := map[string][]string{"v1": {"cpu.cfs_quota_us=2500", "cpu.cfs_period_us=10000"}, "v2": {"cpu.max=2500 10000"}}[g.Version]
	if !slices.Equal(got, want) {
		t.Errorf("%s quota files %v, want %v", g.Version, got, want)
	}
	if _, err := NewGroup(GroupOptions{Quota: 0.05, Period: 10 * time.Millisecond}); !errors.Is(err, ErrBadQuota) {
		t.Errorf("0.05 CPU over 10 ms: %v, want ErrBadQuota", err)
	}
}
