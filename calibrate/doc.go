// Package calibrate is being built.
package calibrate
