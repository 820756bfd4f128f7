// Package predict is being built.
package predict
