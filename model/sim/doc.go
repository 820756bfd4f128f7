// Package sim is a discrete-event simulation of the ICPE'14 §4 broker
// model: a pipeline of timed places, each a thread with a FIFO of message
// tokens, sharing the broker's CPUs under the paper's scheduling strategy
// (a thread keeps running until its work is done or it has run for the
// quantum q while another waits; a CPU that changes threads adds the
// context-switch penalty c to the first token it serves), with garbage
// collection pauses every N messages, an optional queue capacity (flow
// control), and the system place whose CPU counts in utilisation but not
// in latency.
//
// The model is its own struct (Model), so tests build it directly;
// FromCalibration builds it from calibration.json. Run simulates one
// arrival pattern at one rate, deterministically for a seed, in memory
// bounded by the messages in flight: latencies stream into a histogram.
// docs/predict.md says what the simulation assumes and where it differs
// from the paper's QPN.
package sim
