package sweep

import (
	"fmt"
	"math"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
)

// The shares of a CPU limit at which a saturated step's CPU counts as
// full. A broker that saturates its CPU reads 0.99 of it (nats-server,
// ActiveMQ and RabbitMQ pinned to one here), one under a quota a few
// percent below the quota (enforced per period); nats-server held back
// by a full load CPU read 0.71-0.90. The load's CPUs read 0.98-1.0 when
// full (0.92 over a 1 s window beside busy loops).
const (
	brokerFull = 0.95
	quotaFull  = 0.9
	loadFull   = 0.9
)

// loadBusy fills LoadCPUsBusy: the load's CPUs' exact busy time in the
// window, from cpu_cores.csv.
func loadBusy(dir string, st *recfile.SweepStep, o recfile.SweepOptions, in func(int64) bool) error {
	cpus, n, err := cpuSet(o.LoadCPUs)
	if err != nil || n == 0 {
		return err
	}
	busy := map[int64]float64{} // CPU → busy ns
	var dur float64
	var last int64 = math.MinInt64
	err = recfile.ScanTable(filepath.Join(dir, recfile.CPUCoresFile), func(r *recfile.CPUCoreRow) error {
		if !midIn(in, r.TStart, r.TEnd) || !cpus.IsSet(int(r.CPU)) || math.IsNaN(r.BusyExact) {
			return nil
		}
		d := float64(r.TEnd - r.TStart)
		busy[r.CPU] += r.BusyExact * d
		if r.TStart != last { // one window, every CPU's row
			dur, last = dur+d, r.TStart
		}
		return nil
	})
	if err != nil || dur == 0 {
		return absent(st, orNotExist(err, dur), "load_cpus_busy")
	}
	st.LoadCPUsBusy = 0
	for _, b := range busy {
		st.LoadCPUsBusy += b / dur
	}
	return nil
}

// cpuSet is the CPUs of a list like "1" or "0-2,5", and how many; none
// for "".
func cpuSet(s string) (unix.CPUSet, int, error) {
	if s == "" {
		return unix.CPUSet{}, 0, nil
	}
	set, err := process.ParseCPUList(s)
	if err != nil {
		return set, 0, fmt.Errorf("CPU list %q: %w", s, err)
	}
	return set, set.Count(), nil
}

// bottleneck says whose CPU held a saturated step back: the broker's when
// its utilisation reached its limit (brokerFull of its CPUs, or quotaFull
// of its quota), else the load's when their busy time reached loadFull of
// them, else neither. hostCPUs stands for the broker's CPUs when they
// were not given.
func bottleneck(st *recfile.SweepStep, o recfile.SweepOptions, hostCPUs int) (string, error) {
	if !st.Saturated {
		return "", nil
	}
	_, broker, err := cpuSet(o.BrokerCPUs)
	if err != nil {
		return "", err
	}
	_, load, err := cpuSet(o.LoadCPUs)
	if err != nil {
		return "", err
	}
	cpus := float64(hostCPUs)
	if broker > 0 {
		cpus = float64(broker)
	}
	full := brokerFull * cpus
	if o.CPUQuota > 0 && o.CPUQuota < cpus {
		full = quotaFull * o.CPUQuota
	}
	switch {
	case st.BrokerUtil >= full:
		return recfile.BottleneckBroker, nil
	case load > 0 && st.LoadCPUsBusy >= loadFull*float64(load):
		return recfile.BottleneckLoad, nil
	}
	return recfile.BottleneckNeither, nil
}
