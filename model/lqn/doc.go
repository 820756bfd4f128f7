// Package lqn is being built.
package lqn
