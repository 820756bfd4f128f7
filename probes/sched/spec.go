package sched

import (
	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/source"
)

// Spec is the scheduler source's entry in the table of sources (--sched).
func Spec() source.Spec {
	var on bool
	return source.Spec{
		Name: "sched",
		Flags: func(fl *pflag.FlagSet) {
			fl.BoolVar(&on, "sched", true, "record context switches and on-CPU time of the target's threads (sched.csv, threads.csv, ctxsw and oncpu_ns in messages.csv)")
		},
		New: func(*process.Process) (source.Source, error) {
			if !on {
				return nil, nil
			}
			return NewSource(Options{}), nil
		},
	}
}
