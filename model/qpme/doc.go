// Package qpme is being built.
package qpme
