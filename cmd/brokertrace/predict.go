package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newPredictCmd is being built.
func newPredictCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "predict",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return withCode(exitFailure, errors.New("predict: not built yet"))
		},
	}
}
