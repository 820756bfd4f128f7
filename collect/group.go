package collect

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// ErrNoCgroup is wrapped by NewGroup's error when this host cannot give a
// broker a cgroup of its own (no cgroup hierarchy with CPU accounting, or no
// cpuset controller for --cpus).
var ErrNoCgroup = errors.New("cannot create a cgroup on this host")

// ErrBadCPUs is wrapped by NewGroup's error when the kernel refuses the CPU
// list.
var ErrBadCPUs = errors.New("bad CPU list")

// GroupParent is the cgroup under which every Group is created, so that
// brokertrace's cgroups are easy to find and never collide with others'.
const GroupParent = "brokertrace"

// Group is a cgroup created to run one broker in (`brokertrace run`): the
// cgroup's CPU accounting then counts that broker and nothing else, which
// is what ICPE'14 measures; and with a CPU list the broker runs only there.
type Group struct {
	Version string   // "v1" or "v2"
	Path    string   // the cgroup path under the hierarchy's mount: /brokertrace/run-PID-RANDOM
	Dirs    []string // the directories created: one per v1 hierarchy (cpu, cpuacct, cpuset), or the cgroup2 one
	CPUs    string   // cpuset.cpus, "" when the CPUs were left alone
	// Quota is the CPU time the group may use, in CPUs' worth, over each
	// Period (0: unlimited).
	Quota  float64
	Period time.Duration

	v1      cgroup1.Cgroup
	v2      *cgroup2.Manager
	parents []string
}

// GroupOptions configure NewGroup.
type GroupOptions struct {
	// CPUs is a CPU list (cpuset.cpus syntax: "1", "0-3,6") the group's
	// processes may run on; "" leaves them unrestricted.
	CPUs string

	// Quota caps the group's CPU time at this many CPUs' worth (cpu.max on
	// cgroup2, cpu.cfs_quota_us over cpu.cfs_period_us on v1): a broker
	// throttled to a known capacity, e.g. to test that a sweep finds where
	// it saturates. 0 leaves the CPU time unlimited. The kernel accepts
	// quotas of at least 1 ms per period.
	Quota float64
	// Period is the quota's accounting period; 0 is DefaultQuotaPeriod.
	// A shorter period throttles in finer slices: the broker is stopped
	// for less time at once, so fewer messages queue up and get handled
	// in one cheaper batch after each throttle.
	Period time.Duration

	// version forces "v1" or "v2"; by default v1 is used when a v1
	// cpuacct hierarchy is mounted (legacy and hybrid hosts), else cgroup2.
	version string
}

// DefaultQuotaPeriod is the kernel's default cpu.cfs_period_us.
const DefaultQuotaPeriod = 100 * time.Millisecond

// ErrBadQuota is wrapped by NewGroup's error when the quota is out of
// the kernel's range or the host has no CPU controller to enforce it.
var ErrBadQuota = errors.New("bad CPU quota")

// quota is the quota and period in µs, as both cgroup versions take them.
func (o GroupOptions) quota() (quota int64, period uint64, err error) {
	if o.Quota == 0 {
		return 0, 0, nil
	}
	p := cmp.Or(o.Period, DefaultQuotaPeriod)
	quota = int64(o.Quota * float64(p.Microseconds()))
	if !(o.Quota > 0) || quota < 1000 || p < time.Millisecond || p > time.Second {
		return 0, 0, fmt.Errorf("%w: %g CPUs over %v: give a period of 1ms to 1s and a quota of at least 1ms in it", ErrBadQuota, o.Quota, p)
	}
	return quota, uint64(p.Microseconds()), nil
}

// NewGroup creates a fresh cgroup under GroupParent: on v1 in the cpu and
// cpuacct hierarchies, and in cpuset when CPUs is set (its cpuset.mems
// copied from the parent); on cgroup2 one directory with the cpu controller
// (when the host delegates it) and cpuset when CPUs is set. With a Quota
// the cpu controller is required. Delete removes it.
func NewGroup(opts GroupOptions) (*Group, error) {
	l := discover("")
	version := opts.version
	if version == "" {
		switch {
		case l.cpuacct != nil:
			version = "v1"
		case l.unified != nil:
			version = "v2"
		default:
			return nil, fmt.Errorf("%w: no v1 cpuacct and no cgroup2 hierarchy is mounted", ErrNoCgroup)
		}
	}
	if version == "v2" && l.unified == nil {
		return nil, fmt.Errorf("%w: no cgroup2 hierarchy is mounted", ErrNoCgroup)
	}
	quota, period, err := opts.quota()
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		var suffix [4]byte
		rand.Read(suffix[:])
		path := fmt.Sprintf("/%s/run-%d-%s", GroupParent, os.Getpid(), hex.EncodeToString(suffix[:]))
		g := &Group{Version: version, Path: path, CPUs: opts.CPUs}
		if quota > 0 {
			g.Quota, g.Period = opts.Quota, time.Duration(period)*time.Microsecond
		}
		var err error
		if version == "v1" {
			err = g.createV1(quota, period)
		} else {
			err = g.createV2(l.unified.mount, quota, period)
		}
		if err == nil {
			return g, nil
		}
		g.removeDirs()
		// Another brokertrace may have removed the shared parent between
		// our creating it and our group in it.
		if !errors.Is(err, fs.ErrNotExist) || attempt == 2 {
			return nil, err
		}
	}
}

// pather is what cgroup1's subsystems with a directory provide.
type pather interface {
	cgroup1.Subsystem
	Path(path string) string
}

func (g *Group) createV1(quota int64, period uint64) error {
	all, err := cgroup1.Default()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	want := []cgroup1.Name{cgroup1.Cpu, cgroup1.Cpuacct}
	if g.CPUs != "" {
		want = append(want, cgroup1.Cpuset)
	}
	var subs []cgroup1.Subsystem
	for _, name := range want {
		i := slices.IndexFunc(all, func(s cgroup1.Subsystem) bool { return s.Name() == name })
		if i < 0 {
			if name == cgroup1.Cpu && quota == 0 {
				continue // only accounting (cpuacct) is needed
			}
			return fmt.Errorf("%w: no v1 %s hierarchy is mounted", ErrNoCgroup, name)
		}
		subs = append(subs, all[i])
		p := all[i].(pather)
		dir := p.Path(g.Path)
		if !slices.Contains(g.Dirs, dir) { // co-mounted cpu,cpuacct share one
			g.Dirs = append(g.Dirs, dir)
			g.parents = append(g.parents, filepath.Dir(dir))
		}
	}
	res := &specs.LinuxResources{CPU: &specs.LinuxCPU{Cpus: g.CPUs}}
	if quota > 0 {
		res.CPU.Quota, res.CPU.Period = &quota, &period
	}
	cg, err := cgroup1.New(cgroup1.StaticPath(g.Path), res, cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) { return subs, nil }))
	if err != nil {
		if g.CPUs != "" && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ERANGE)) {
			return fmt.Errorf("%w: the kernel refused cpuset.cpus %q (%v); this host's CPUs are %s", ErrBadCPUs, g.CPUs, err, hostCPUs())
		}
		return fmt.Errorf("create cgroup %s: %w", g.Path, err)
	}
	g.v1 = cg
	return nil
}

func (g *Group) createV2(mount string, quota int64, period uint64) error {
	dir := filepath.Join(mount, g.Path)
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("create cgroup %s: %w", g.Path, err)
	}
	g.parents = []string{parent}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("create cgroup %s: %w", g.Path, err)
	}
	g.Dirs = []string{dir}
	b, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	avail := strings.Fields(string(b))
	var enable []string
	if slices.Contains(avail, "cpu") {
		enable = append(enable, "cpu")
	} else if quota > 0 {
		return fmt.Errorf("%w: the cpu controller is not available in %s (controllers: %s)", ErrBadQuota, mount, strings.Join(avail, " "))
	}
	if g.CPUs != "" {
		if !slices.Contains(avail, "cpuset") {
			return fmt.Errorf("%w: the cpuset controller is not available in %s (controllers: %s)", ErrNoCgroup, mount, strings.Join(avail, " "))
		}
		enable = append(enable, "cpuset")
	}
	m, err := cgroup2.Load(g.Path, cgroup2.WithMountpoint(mount))
	if err != nil {
		return fmt.Errorf("create cgroup %s: %w", g.Path, err)
	}
	g.v2 = m
	if len(enable) > 0 {
		if err := m.ToggleControllers(enable, cgroup2.Enable); err != nil {
			return fmt.Errorf("%w: enable %s: %v", ErrNoCgroup, strings.Join(enable, ", "), err)
		}
	}
	if g.CPUs != "" {
		if err := m.Update(&cgroup2.Resources{CPU: &cgroup2.CPU{Cpus: g.CPUs}}); err != nil {
			return fmt.Errorf("%w: the kernel refused cpuset.cpus %q (%v); this host's CPUs are %s", ErrBadCPUs, g.CPUs, err, hostCPUs())
		}
	}
	if quota > 0 {
		if err := m.Update(&cgroup2.Resources{CPU: &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period)}}); err != nil {
			return fmt.Errorf("%w: the kernel refused cpu.max %d %d: %v", ErrBadQuota, quota, period, err)
		}
	}
	return nil
}

// hostCPUs is the list of online CPUs, for messages.
func hostCPUs() string {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// Procs lists the processes in the group.
func (g *Group) Procs() ([]int, error) {
	var pids []int
	switch {
	case g.v2 != nil:
		ps, err := g.v2.Procs(true)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			pids = append(pids, int(p))
		}
	case g.v1 != nil:
		ps, err := g.v1.Processes(cgroup1.Cpuacct, true)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			pids = append(pids, p.Pid)
		}
	}
	return pids, nil
}

// Kill sends SIGKILL to every process in the group and waits up to five
// seconds until the group is empty.
func (g *Group) Kill() error {
	if g.v2 != nil {
		if err := g.v2.Kill(); err != nil {
			return err
		}
	}
	var pids []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var err error
		pids, err = g.Procs()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			unix.Kill(p, unix.SIGKILL)
		}
	}
	return fmt.Errorf("cgroup %s still holds processes %v after SIGKILL", g.Path, pids)
}

// Delete kills what is left in the group and removes its directories, and
// GroupParent too when no other group is left in it.
func (g *Group) Delete() error {
	if g.v1 == nil && g.v2 == nil {
		return nil
	}
	if err := g.Kill(); err != nil {
		return err
	}
	var err error
	if g.v2 != nil {
		err = g.v2.Delete()
	} else {
		err = g.v1.Delete()
	}
	if err != nil {
		return fmt.Errorf("remove cgroup %s: %w", g.Path, err)
	}
	g.v1, g.v2 = nil, nil
	g.removeParents()
	return nil
}

// removeDirs undoes a partial NewGroup.
func (g *Group) removeDirs() {
	for _, d := range g.Dirs {
		os.Remove(d)
	}
	g.removeParents()
}

func (g *Group) removeParents() {
	for _, p := range g.parents {
		os.Remove(p) // fails while other groups are in it, as it should
	}
}
