package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newCalibrateCmd is being built.
func newCalibrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "calibrate",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return withCode(exitFailure, errors.New("calibrate: not built yet"))
		},
	}
}
