package sockq

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/source"
)

// Spec is the socket-queue source's entry in the table of sources
// (--sockq…): when each message's bytes arrived on the broker's socket, and
// how long they waited there (t_arrive_ns, sockq_wait_ns in messages.csv).
func Spec() source.Spec {
	var (
		on   bool
		path string
		opts SourceOptions
	)
	return source.Spec{
		Name: "sockq",
		Flags: func(fl *pflag.FlagSet) {
			fl.BoolVar(&on, "sockq", true, "record when each message's bytes were queued on the broker's socket and how long they waited there (t_arrive_ns, sockq_wait_ns in messages.csv)")
			fl.StringVar(&path, "sockq-path", "auto", "socket-queue probe hook: auto, data_ready (sock:sk_data_ready, Linux 6.3+) or tcp_probe (older kernels)")
			fl.IntVar(&opts.RingSize, "sockq-ring-size", 4<<20, "socket-queue probe ring buffer size in bytes (a power of two)")
			fl.DurationVar(&opts.Horizon, "sockq-horizon", 0, "keep socket-queue samples this long: messages whose bytes arrived longer before their copy left get empty t_arrive_ns (default: --id-ttl + 10s)")
		},
		New: func(*process.Process) (source.Source, error) {
			if !on {
				return nil, nil
			}
			switch path {
			case "auto", "":
				opts.Path = PathAuto
			case "data_ready":
				opts.Path = PathDataReady
			case "tcp_probe":
				opts.Path = PathTCPProbe
			default:
				return nil, fmt.Errorf("record: --sockq-path must be auto, data_ready or tcp_probe, not %q", path)
			}
			if opts.RingSize < os.Getpagesize() || opts.RingSize&(opts.RingSize-1) != 0 {
				return nil, fmt.Errorf("record: --sockq-ring-size must be a power of two of at least %d bytes", os.Getpagesize())
			}
			if opts.Horizon != 0 && opts.Horizon < time.Second {
				return nil, errors.New("record: --sockq-horizon must be at least 1s (or 0: --id-ttl + 10s)")
			}
			return NewSource(opts), nil
		},
	}
}
