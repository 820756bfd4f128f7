// Package sweep is being built.
package sweep
