package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/probes/sockq"
	"github.com/brokertrace/brokertrace/record"
	"github.com/brokertrace/brokertrace/target"
)

// --sockq: when each message's bytes arrived on the broker's socket, and
// how long they waited there (t_arrive_ns, sockq_wait_ns in messages.csv).
var (
	sockqOn       bool
	sockqPath     string
	sockqRingSize int
	sockqHorizon  time.Duration
)

func init() {
	sourceSpecs = append(sourceSpecs, sourceSpec{
		flags: func(fl *pflag.FlagSet) {
			fl.BoolVar(&sockqOn, "sockq", true, "record when each message's bytes were queued on the broker's socket and how long they waited there (t_arrive_ns, sockq_wait_ns in messages.csv)")
			fl.StringVar(&sockqPath, "sockq-path", "auto", "socket-queue probe hook: auto, data_ready (sock:sk_data_ready, Linux 6.3+) or tcp_probe (older kernels)")
			fl.IntVar(&sockqRingSize, "sockq-ring-size", 8<<20, "socket-queue probe ring buffer size in bytes (a power of two)")
			fl.DurationVar(&sockqHorizon, "sockq-horizon", sockq.DefaultHorizon, "keep socket-queue samples this long: messages that stay longer in the broker get empty t_arrive_ns")
		},
		make: makeSockqSource,
	})
}

func makeSockqSource(*target.Process, *recordFlags) (record.Source, error) {
	if !sockqOn {
		return nil, nil
	}
	var path sockq.Path
	switch sockqPath {
	case "auto", "":
		path = sockq.PathAuto
	case "data_ready":
		path = sockq.PathDataReady
	case "tcp_probe":
		path = sockq.PathTCPProbe
	default:
		return nil, fmt.Errorf("record: --sockq-path must be auto, data_ready or tcp_probe, not %q", sockqPath)
	}
	if sockqRingSize < os.Getpagesize() || sockqRingSize&(sockqRingSize-1) != 0 {
		return nil, fmt.Errorf("record: --sockq-ring-size must be a power of two of at least %d bytes", os.Getpagesize())
	}
	if sockqHorizon < time.Second {
		return nil, errors.New("record: --sockq-horizon must be at least 1s")
	}
	return sockq.NewSource(sockq.SourceOptions{Path: path, RingSize: sockqRingSize, Horizon: sockqHorizon}), nil
}
