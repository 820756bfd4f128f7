package sched

import "github.com/brokertrace/brokertrace/source"

// Spec is the scheduler source's entry in the table of sources (--sched).
func Spec() source.Spec {
	return source.Switch("sched", "sched",
		"record context switches and on-CPU time of the target's threads (sched.csv, threads.csv, ctxsw and oncpu_ns in messages.csv)",
		func() source.Source { return NewSource(Options{}) })
}
