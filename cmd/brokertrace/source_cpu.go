package main

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/collect"
	"github.com/brokertrace/brokertrace/record"
	"github.com/brokertrace/brokertrace/target"
)

// --cpu, --cpu-every: CPU accounting (cgroup, /proc; cpu.csv,
// cpu_per_msg.csv, cpu_cores.csv).
var (
	cpuOn    bool
	cpuEvery int
)

func init() {
	sourceSpecs = append(sourceSpecs, sourceSpec{
		flags: func(fl *pflag.FlagSet) {
			fl.BoolVar(&cpuOn, "cpu", true, "record the broker's CPU time (its cgroup, /proc/PID) and the system's (/proc/stat, irq, softirq) every window (cpu.csv, cpu_per_msg.csv, cpu_cores.csv)")
			fl.IntVar(&cpuEvery, "cpu-every", collect.DefaultEvery, "cpu_per_msg.csv: the broker's CPU per message C_n at every N-th message leaving the broker")
		},
		make: func(*target.Process, *recordFlags) (record.Source, error) {
			if !cpuOn {
				return nil, nil
			}
			if cpuEvery < 1 {
				return nil, errors.New("record: --cpu-every must be at least 1")
			}
			return collect.NewSource(collect.Options{Every: cpuEvery}), nil
		},
	})
}
