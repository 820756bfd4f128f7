package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newSweepCmd is being built.
func newSweepCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "sweep",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return withCode(exitFailure, errors.New("sweep: not built yet"))
		},
	}
}
