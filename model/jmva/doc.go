// Package jmva is being built.
package jmva
