// Package kernels checks the kernel matrix (make kernels, scripts/kernels.sh):
// the recordings brokertrace made of nats-server on each of Debian's
// kernels under qemu and on the host's, against the truths each run kept
// (the ids the load sent, the loopback device's packet counter, the broker
// threads' switch counters), and the socket probe's tests run on each
// kernel. Its test is built with the tag "kernels" and reads the results
// directory named by $BROKERTRACE_KERNELS, so that `go test ./...` does not
// run it without them.
package kernels
