// Command brokertrace measures an unmodified, running message broker from the
// kernel: per-message latency inside the broker from its socket I/O,
// scheduler and CPU accounting, and packet capture.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/brokertrace/brokertrace/collect"
	"github.com/brokertrace/brokertrace/outdir"
)

// Exit codes. Scripts rely on them.
const (
	exitOK       = 0
	exitFailure  = 1 // the measurement could not be made or completed
	exitUsage    = 2 // bad flags or arguments
	exitNoTarget = 3 // the target process or broker could not be found or reached
	exitNoPriv   = 4 // not root / missing capabilities / kernel lacks a feature
)

// exitError carries an exit code through cobra's error return.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// newRootCmd builds the command tree. Every command keeps its flags in
// variables of its own, so nothing is shared between two trees.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "brokertrace",
		Short: "Kernel-level tracing and measurement of message brokers",
		Long: `brokertrace attaches eBPF probes to an unmodified, already running message
broker and measures, for every message, the time it spent inside the broker:
from the socket read that brought it in to the socket write that sent it on.
Messages are matched by the marker BTID<16 hex digits> that producers put in
their bodies; payload bytes never leave the kernel.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRecordCmd(), newRunCmd(), newLoadCmd(), newReportCmd(), newOverheadCmd(),
		newSweepCmd(), newCalibrateCmd(), newPredictCmd(), newPlatformCmd(), newExportCmd(), newClusterCmd())
	addBareMode(root) // no subcommand: discover the host's brokers, show one live
	return root
}

func main() {
	// On cgroup v1 hosts `run` starts the broker through a copy of this
	// program that joins the cgroup before it execs the broker.
	collect.RunShim()
	err := newRootCmd().Execute()
	if err == nil {
		os.Exit(exitOK)
	}
	fmt.Fprintf(os.Stderr, "brokertrace: %v\n", err)
	var ee *exitError
	switch {
	case errors.Is(err, outdir.ErrUnsafe):
		// An output path brokertrace will not write through is a bad
		// argument, whichever command and step met it.
		os.Exit(exitUsage)
	case errors.As(err, &ee):
		os.Exit(ee.code)
	}
	// cobra's own flag and argument errors.
	os.Exit(exitUsage)
}
