// Package sim is being built.
package sim
