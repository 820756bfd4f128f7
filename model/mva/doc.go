// Package mva is being built.
package mva
