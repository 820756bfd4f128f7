package collect

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/kernfs"
	"github.com/brokertrace/brokertrace/recfile"
)

// debugfs is where the scheduler's tunables live since Linux 5.13.
var debugfs = kernfs.Debugfs.Dir

// SchedSettings reads the scheduler's time-slice settings, the quantum of
// a broker model: EEVDF's base slice (Linux 6.6+) or CFS's latency and
// granularities (older kernels). Since 5.13 they are only in debugfs, which
// is mounted here if it is not; some kernels refuse reads of the single
// files (base_slice_ns) but print the same value in sched/debug, which is
// read then. Before 5.13 they are sysctls in /proc/sys/kernel.
func SchedSettings() recfile.SchedSettings {
	// A failed mount is left to the readers to report.
	m, _ := kernfs.Ensure(kernfs.Debugfs)
	var errs []error
	for _, read := range []func() (recfile.SchedSettings, error){readSchedFiles, readSchedDebug, readSchedSysctls} {
		s, err := read()
		if err == nil && len(s.Settings) > 0 {
			s.Note = m.Note
			return s
		}
		errs = append(errs, err)
	}
	return recfile.SchedSettings{Error: errors.Join(errs...).Error(), Note: m.Note}
}

// schedFiles are the single-value files of sched/ in debugfs (ns).
var schedFiles = []string{"base_slice_ns", "latency_ns", "min_granularity_ns", "wakeup_granularity_ns"}

func readSchedFiles() (recfile.SchedSettings, error) {
	dir := filepath.Join(debugfs, "sched")
	s := recfile.SchedSettings{Settings: map[string]int64{}, Source: dir}
	var errs []error
	for _, name := range schedFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return s, fmt.Errorf("%s: %w", name, err)
		}
		s.Settings[name] = v
	}
	if len(s.Settings) == 0 {
		return s, errors.Join(append(errs, fmt.Errorf("%s: no readable slice setting", dir))...)
	}
	s.Scaling = readScaling(filepath.Join(dir, "tunable_scaling"))
	return s, nil
}

// readSchedDebug reads the "sysctl_sched" block of sched/debug, whose
// lines look like "  .sysctl_sched_base_slice   : 1.400000" (ms) and
// "  .sysctl_sched_tunable_scaling : 1 (logarithmic)".
func readSchedDebug() (recfile.SchedSettings, error) {
	path := filepath.Join(debugfs, "sched", "debug")
	f, err := os.Open(path)
	if err != nil {
		return recfile.SchedSettings{}, err
	}
	defer f.Close()
	s := recfile.SchedSettings{Settings: map[string]int64{}, Source: path}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		name = strings.TrimPrefix(strings.TrimSpace(name), ".sysctl_sched_")
		if !ok || name == strings.TrimSpace(sc.Text()) {
			continue
		}
		if name == "tunable_scaling" {
			s.Scaling = scalingName(val)
			continue
		}
		if !slices.Contains(schedFiles, name+"_ns") {
			continue
		}
		ms, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return s, fmt.Errorf("%s: %s: %w", path, name, err)
		}
		s.Settings[name+"_ns"] = int64(ms*1e6 + 0.5)
	}
	return s, sc.Err()
}

// readSchedSysctls reads CFS's sysctls of kernels before 5.13.
func readSchedSysctls() (recfile.SchedSettings, error) {
	s := recfile.SchedSettings{Settings: map[string]int64{}, Source: "/proc/sys/kernel/sched_*"}
	for _, name := range schedFiles[1:] {
		b, err := os.ReadFile("/proc/sys/kernel/sched_" + name)
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			s.Settings[name] = v
		}
	}
	if len(s.Settings) == 0 {
		return s, errors.New("/proc/sys/kernel: no sched_*_ns sysctl")
	}
	s.Scaling = readScaling("/proc/sys/kernel/sched_tunable_scaling")
	return s, nil
}

func readScaling(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return scalingName(string(b))
}

// scalingName names sysctl_sched_tunable_scaling's value ("1" or
// "1 (logarithmic)").
func scalingName(v string) string {
	f := strings.Fields(v)
	if len(f) == 0 {
		return ""
	}
	switch f[0] {
	case "0":
		return "none"
	case "1":
		return "logarithmic"
	case "2":
		return "linear"
	}
	return f[0]
}
