// Package mva solves open queueing networks exactly where they have a
// product form (Jackson/BCMP): each station FCFS with exponential service
// or processor sharing, one or more servers, or a delay. It is the
// reference the simulator (model/sim) is checked against in the special
// case where the broker model reduces to such a network, and a quick
// what-if for the calibrated demands.
package mva
