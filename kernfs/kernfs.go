// Package kernfs finds the kernel's tracing filesystems, tracefs and
// debugfs, and mounts them where the kernel documents them when nothing is
// mounted there, as perf does: a fresh host mounts neither, and the
// per-system-call tracepoints (tracefs) and the scheduler's settings
// (debugfs) are only there. brokertrace runs as root, so it can; what it
// did is returned in words, for meta.json and the summary, since a tool
// that changes its host says so.
package kernfs

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// FS is a kernel filesystem brokertrace may need mounted.
type FS struct {
	Name  string // the filesystem type, as mount(8) takes it
	Dir   string // where the kernel documents it is mounted
	magic int64  // its statfs f_type
}

var (
	// Tracefs holds the tracepoints' ids (events/GROUP/NAME/id) that
	// perf-event tracepoints attach by.
	Tracefs = FS{Name: "tracefs", Dir: "/sys/kernel/tracing", magic: unix.TRACEFS_MAGIC}
	// Debugfs holds the scheduler's tunables since Linux 5.13 (sched/),
	// and tracefs under tracing/ on kernels that predate its own mount
	// point.
	Debugfs = FS{Name: "debugfs", Dir: "/sys/kernel/debug", magic: unix.DEBUGFS_MAGIC}
)

// Mount says how a filesystem was found.
type Mount struct {
	Dir string
	// Mounted is set when this process mounted it (nothing was mounted at
	// Dir before); Note says so in words.
	Mounted bool
	Note    string
}

type result struct {
	m   Mount
	err error
}

var (
	mu      sync.Mutex
	results = map[string]result{}
)

// Ensure returns where fs is mounted, mounting it at fs.Dir first when it
// is not. The outcome is kept: a later call returns the same Mount (with
// the note of the mount this process made) or the same error, so that every
// probe that needed the filesystem can say what was done for it.
func Ensure(fs FS) (Mount, error) {
	mu.Lock()
	defer mu.Unlock()
	if r, ok := results[fs.Name]; ok {
		return r.m, r.err
	}
	m, err := ensure(fs)
	results[fs.Name] = result{m, err}
	return m, err
}

func ensure(fs FS) (Mount, error) {
	if IsMounted(fs) {
		return Mount{Dir: fs.Dir}, nil
	}
	if fs == Tracefs && IsMounted(Debugfs) {
		// Older kernels and RHEL: tracefs inside debugfs (an automount
		// since 4.1), where tracing tools look too.
		if st, err := os.Stat(Debugfs.Dir + "/tracing/events"); err == nil && st.IsDir() {
			return Mount{Dir: Debugfs.Dir + "/tracing"}, nil
		}
	}
	if err := unix.Mount(fs.Name, fs.Dir, fs.Name, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return Mount{}, fmt.Errorf("%s is not mounted and mounting it at %s failed: %w", fs.Name, fs.Dir, err)
	}
	if !IsMounted(fs) {
		return Mount{}, fmt.Errorf("%s: mounted at %s but the directory does not show it", fs.Name, fs.Dir)
	}
	return Mount{Dir: fs.Dir, Mounted: true,
		Note: fmt.Sprintf("mounted %s at %s (nothing was mounted there; left mounted, as perf does)", fs.Name, fs.Dir)}, nil
}

// IsMounted reports whether fs is mounted at fs.Dir.
func IsMounted(fs FS) bool {
	var st unix.Statfs_t
	return unix.Statfs(fs.Dir, &st) == nil && int64(st.Type) == fs.magic
}
