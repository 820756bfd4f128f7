package main

import (
	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/probes/sched"
	"github.com/brokertrace/brokertrace/record"
	"github.com/brokertrace/brokertrace/target"
)

// --sched: scheduler probes (issue: context switches per message).
var schedOn bool

func init() {
	sourceSpecs = append(sourceSpecs, sourceSpec{
		flags: func(fl *pflag.FlagSet) {
			fl.BoolVar(&schedOn, "sched", true, "record context switches and on-CPU time of the target's threads (sched.csv, threads.csv, ctxsw and oncpu_ns in messages.csv)")
		},
		make: func(*target.Process, *recordFlags) (record.Source, error) {
			if !schedOn {
				return nil, nil
			}
			return sched.NewSource(sched.Options{}), nil
		},
	})
}
