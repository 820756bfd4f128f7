package main

import (
	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/record"
	"github.com/brokertrace/brokertrace/target"
)

// A sourceSpec puts a record.Source (scheduler probes, CPU accounting,
// packet capture…) into every recording, with the flags that configure it.
// Each source registers itself from its own file (source_NAME.go) in init.
type sourceSpec struct {
	// flags registers the source's flags on record and run.
	flags func(fl *pflag.FlagSet)
	// make returns the source for a recording of proc, nil when the user
	// turned it off, or an error for bad flag values.
	make func(proc *target.Process, f *recordFlags) (record.Source, error)
}

var sourceSpecs []sourceSpec
