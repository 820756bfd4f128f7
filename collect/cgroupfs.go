// Package collect reads the CPU accounting a recording needs beside its
// probes: the broker's cgroup (the cpu/cpuacct controller, ICPE'14 §5: "more
// accurate than other sources", but blind to the kernel's network processing
// outside the broker), the broker's own /proc counters, and the system-wide
// /proc/stat with its irq and softirq time, so that the processing outside the
// broker is the difference (ICPE'14 §4.4). It also creates the cgroup that
// `brokertrace run` starts a broker in, so that the cgroup holds the broker
// and nothing else.
package collect

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	v1stats "github.com/containerd/cgroups/v3/cgroup1/stats"
	"github.com/containerd/cgroups/v3/cgroup2"
	"github.com/prometheus/procfs"
)

// hierarchy is one mounted cgroup hierarchy: where it is mounted and which
// cgroup of the hierarchy the mount shows (mountinfo's root field: "/"
// unless the mount is a bind of a sub-cgroup, as in a container).
type hierarchy struct {
	mount string
	root  string
}

// dir maps a cgroup path as /proc/PID/cgroup shows it to the directory of
// that cgroup under the mount; ok is false when the cgroup is outside what
// the mount shows.
func (h *hierarchy) dir(path string) (string, bool) {
	rel, err := filepath.Rel(h.root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.Join(h.mount, rel), true
}

// layout is how this host mounts the cgroup hierarchies that account CPU
// time: a v1 hierarchy with the cpuacct controller (legacy and hybrid
// hosts), a cgroup2 hierarchy (hybrid: /sys/fs/cgroup/unified; unified:
// /sys/fs/cgroup), or both.
type layout struct {
	cpuacct *hierarchy // v1 hierarchy holding cpuacct (possibly co-mounted with cpu)
	unified *hierarchy // the cgroup2 hierarchy
	mode    string     // legacy, hybrid, unified or none
	where   string     // what was searched, for messages
}

// discover finds the hierarchies. With root == "" it reads the mount table
// (/proc/self/mountinfo), which finds them wherever they are mounted;
// otherwise it looks only under root, the way /sys/fs/cgroup is laid out
// (root/cpuacct for v1, root or root/unified for cgroup2) — tests use this
// to simulate hosts without the controllers.
func discover(root string) layout {
	var l layout
	if root == "" {
		l.where = "/proc/self/mountinfo"
		mounts, err := procfs.GetMounts()
		if err == nil {
			for _, m := range mounts {
				switch m.FSType {
				case "cgroup":
					if _, ok := m.SuperOptions["cpuacct"]; ok && l.cpuacct == nil {
						l.cpuacct = &hierarchy{mount: m.MountPoint, root: m.Root}
					}
				case "cgroup2":
					if l.unified == nil {
						l.unified = &hierarchy{mount: m.MountPoint, root: m.Root}
					}
				}
			}
		}
		switch cgroups.Mode() {
		case cgroups.Legacy:
			l.mode = "legacy"
		case cgroups.Hybrid:
			l.mode = "hybrid"
		case cgroups.Unified:
			l.mode = "unified"
		default:
			l.mode = "none"
		}
		return l
	}
	l.where = root
	if exists(filepath.Join(root, "cpuacct", "cpuacct.usage")) {
		l.cpuacct = &hierarchy{mount: filepath.Join(root, "cpuacct"), root: "/"}
	}
	for _, d := range []string{root, filepath.Join(root, "unified")} {
		if exists(filepath.Join(d, "cgroup.controllers")) {
			l.unified = &hierarchy{mount: d, root: "/"}
			break
		}
	}
	switch {
	case l.cpuacct != nil && l.unified != nil:
		l.mode = "hybrid"
	case l.cpuacct != nil:
		l.mode = "legacy"
	case l.unified != nil:
		l.mode = "unified"
	default:
		l.mode = "none"
	}
	return l
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// CgroupInfo says which cgroup the CPU accounting read.
type CgroupInfo struct {
	HostMode string `json:"host_mode"`         // legacy, hybrid, unified or none
	Version  string `json:"version,omitempty"` // "v1" (cpuacct) or "v2" (cpu.stat); empty when none was read
	Path     string `json:"path,omitempty"`    // the cgroup, as /proc/PID/cgroup names it
	Dir      string `json:"dir,omitempty"`     // the directory read
	// OtherProcesses counts processes other than the target in the cgroup
	// and its descendants when the recording started: their CPU time is in
	// the cgroup's figure too.
	OtherProcesses int `json:"other_processes"`
}

// usage is one reading of a cgroup's CPU time, in ns.
type usage struct {
	total, user, sys int64
}

// cgroupReader reads the CPU time of one cgroup.
type cgroupReader interface {
	read() (usage, error)
}

// v1Reader reads cpuacct.usage (ns) and cpuacct.stat (user/system, clock
// ticks) through cgroup1's cpuacct controller.
type v1Reader struct {
	ctrl interface {
		Stat(path string, m *v1stats.Metrics) error
	}
	path string
}

func newV1Reader(h *hierarchy, dir string) *v1Reader {
	// cgroup1's controller takes the directory that holds a hierarchy named
	// "cpuacct"; a hierarchy mounted under another name (cpu,cpuacct) is
	// reached from there with "..".
	rel, _ := filepath.Rel(h.mount, dir)
	parent := filepath.Dir(h.mount)
	path := filepath.Join("..", filepath.Base(h.mount), rel)
	if filepath.Base(h.mount) == string(cgroup1.Cpuacct) {
		path = "/" + rel
	}
	return &v1Reader{ctrl: cgroup1.NewCpuacct(parent), path: path}
}

func (r *v1Reader) read() (usage, error) {
	m := v1stats.Metrics{CPU: &v1stats.CPUStat{Usage: &v1stats.CPUUsage{}, Throttling: &v1stats.Throttle{}}}
	if err := r.ctrl.Stat(r.path, &m); err != nil {
		return usage{}, err
	}
	u := m.CPU.Usage
	return usage{total: int64(u.Total), user: int64(u.User), sys: int64(u.Kernel)}, nil
}

// v2Reader reads cpu.stat's usage_usec, user_usec and system_usec through
// cgroup2's manager. cpu.stat is there in every cgroup2 cgroup, whether or
// not the cpu controller is enabled.
type v2Reader struct {
	mgr  *cgroup2.Manager
	file string
}

func newV2Reader(h *hierarchy, dir string) (*v2Reader, error) {
	rel, _ := filepath.Rel(h.mount, dir)
	group := "/" + rel
	if rel == "." {
		group = "/"
	}
	mgr, err := cgroup2.Load(group, cgroup2.WithMountpoint(h.mount))
	if err != nil {
		return nil, err
	}
	return &v2Reader{mgr: mgr, file: filepath.Join(dir, "cpu.stat")}, nil
}

func (r *v2Reader) read() (usage, error) {
	// cgroup2 reports a missing cpu.stat as zeros; a cgroup removed during
	// the recording must read as an error, not as no CPU time.
	if _, err := os.Stat(r.file); err != nil {
		return usage{}, err
	}
	m, err := r.mgr.StatFiltered(cgroup2.StatCPU)
	if err != nil {
		return usage{}, err
	}
	c := m.CPU
	return usage{total: int64(c.UsageUsec) * 1000, user: int64(c.UserUsec) * 1000, sys: int64(c.SystemUsec) * 1000}, nil
}

// openCgroup finds the cgroup of pid (or override, a cgroup path, instead of
// the one /proc/PID/cgroup names) and a reader for its CPU time: the v1
// cpuacct hierarchy when the host has one and the target is not in its root,
// else cgroup2. It never fails: when nothing can be read it returns a nil
// reader and, in missing, why.
func openCgroup(l layout, pid int, override string) (r cgroupReader, info CgroupInfo, missing []string) {
	info.HostMode = l.mode
	if l.cpuacct == nil && l.unified == nil {
		return nil, info, []string{fmt.Sprintf("cgroup CPU time: this host has no v1 cpuacct hierarchy and no cgroup2 cpu.stat (searched %s)", l.where)}
	}
	var v1Path, v2Path string
	if override != "" {
		v1Path, v2Path = override, override
	} else {
		file := fmt.Sprintf("/proc/%d/cgroup", pid)
		legacy, unified, err := cgroups.ParseCgroupFileUnified(file)
		if err != nil {
			return nil, info, []string{fmt.Sprintf("cgroup CPU time: cannot read the target's cgroups: %v", err)}
		}
		v1Path, v2Path = legacy[string(cgroup1.Cpuacct)], unified
		if v1Path == "" {
			// A cgroup2 entry exists even without a cgroup2 mount; only
			// the v1 one can be absent.
			v1Path = "-"
		}
	}

	try := func(version string, h *hierarchy, path string) (cgroupReader, string, string) {
		name := map[string]string{"v1": "v1 cpuacct", "v2": "cgroup2"}[version]
		if h == nil {
			return nil, "", ""
		}
		if path == "-" {
			return nil, "", fmt.Sprintf("the target is in no %s cgroup", name)
		}
		if path == "/" {
			return nil, "", rootCgroup + name
		}
		dir, ok := h.dir(path)
		if !ok {
			return nil, "", fmt.Sprintf("the target's %s cgroup %s is outside the mounted hierarchy (%s shows %s)", name, path, h.mount, h.root)
		}
		var rd cgroupReader
		var file string
		if version == "v1" {
			file = filepath.Join(dir, "cpuacct.usage")
			rd = newV1Reader(h, dir)
		} else {
			file = filepath.Join(dir, "cpu.stat")
			v2, err := newV2Reader(h, dir)
			if err != nil {
				return nil, "", fmt.Sprintf("the target's %s cgroup %s: %v", name, path, err)
			}
			rd = v2
		}
		if _, err := os.Stat(file); err != nil {
			return nil, "", fmt.Sprintf("cannot read the target's %s cgroup %s: %v", name, path, err)
		}
		if _, err := rd.read(); err != nil {
			return nil, "", fmt.Sprintf("cannot read the target's %s cgroup %s: %v", name, path, err)
		}
		return rd, dir, ""
	}
	var why, roots []string
	for _, c := range []struct {
		version string
		h       *hierarchy
		path    string
	}{{"v1", l.cpuacct, v1Path}, {"v2", l.unified, v2Path}} {
		rd, dir, reason := try(c.version, c.h, c.path)
		if rd != nil {
			info.Version, info.Path, info.Dir = c.version, c.path, dir
			info.OtherProcesses = otherProcesses(dir, pid)
			return rd, info, nil
		}
		if name, ok := strings.CutPrefix(reason, rootCgroup); ok {
			roots = append(roots, name)
		} else if reason != "" {
			why = append(why, reason)
		}
	}
	if len(roots) > 0 {
		why = append(why, fmt.Sprintf("the target is in the root %s cgroup, which counts every process on the host (start the broker with `brokertrace run` to give it a cgroup of its own)", strings.Join(roots, " and ")))
	}
	return nil, info, []string{"cgroup CPU time: " + strings.Join(why, "; ")}
}

// rootCgroup marks the reason "the target is in the root cgroup", which is
// said once for all hierarchies.
const rootCgroup = "root:"

// otherProcesses counts the processes other than pid in the cgroup at dir
// and its descendants (cpuacct and cpu.stat count descendants too).
func otherProcesses(dir string, pid int) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil && v != pid {
				n++
			}
		}
		return nil
	})
	return n
}
