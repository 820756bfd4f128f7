package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newPlatformCmd is being built.
func newPlatformCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "platform",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return withCode(exitFailure, errors.New("platform: not built yet"))
		},
	}
}
