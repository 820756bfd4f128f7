package collect

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/source"
)

// Spec is the CPU accounting source's entry in the table of sources
// (--cpu, --cpu-every: the broker's cgroup and /proc; cpu.csv,
// cpu_per_msg.csv, cpu_cores.csv).
func Spec() source.Spec {
	var (
		on   bool
		opts Options
	)
	return source.Spec{
		Name: "cpu",
		Flags: func(fl *pflag.FlagSet) {
			fl.BoolVar(&on, "cpu", true, "record the broker's CPU time (its cgroup, /proc/PID) and the system's (/proc/stat, irq, softirq) every window (cpu.csv, cpu_per_msg.csv, cpu_cores.csv)")
			fl.IntVar(&opts.Every, "cpu-every", DefaultEvery, "cpu_per_msg.csv: the broker's CPU per message C_n at every N-th message leaving the broker")
		},
		New: func(*process.Process) (source.Source, error) {
			if !on {
				return nil, nil
			}
			if opts.Every < 1 {
				return nil, errors.New("record: --cpu-every must be at least 1")
			}
			return NewSource(opts), nil
		},
	}
}
