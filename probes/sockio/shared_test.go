package sockio

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/frame"
	"github.com/brokertrace/brokertrace/probes"
)

// The frame tests share one probe per path, walk and match mode: loading
// the frame programs is most of their time. Under the kernel matrix's
// emulated guests the verifier takes 3–8 s per load while a seed's streams
// take tens of ms; 20 loads per guest became 4. Each protocol has a
// listener of its own, whose port the probe parses in that protocol, so
// one probe parses all five. A test that needs a probe of its own (one
// attached after its sockets were connected, say) still opens one.

// shared is a loaded probe and a listener per protocol.
type shared struct {
	c         *collector
	listeners map[frame.Proto]listener
}

type listener struct {
	fd   int
	port uint16
}

// sharedKey is what tells shared probes apart.
type sharedKey struct {
	path  Path
	walk  Walk
	match Match
}

var sharedProbes struct {
	mu sync.Mutex
	m  map[sharedKey]*shared
}

// sharedProbe is the package's probe for opts' path, walk and match mode
// (no mode: frames), opened at first use; only those fields of opts may
// be set. Options that load the same programs share one: no path is the
// path Open takes first, no walk the walk it picks on that path.
func sharedProbe(opts Options) (*shared, error) {
	if opts.PID != 0 || opts.ScanLimit != 0 || opts.RingSize != 0 || opts.FramePorts != nil {
		return nil, fmt.Errorf("a shared probe takes a path, walk and match mode only, not %+v", opts)
	}
	if opts.Path == "" {
		opts.Path = PathSyscalls
		if probes.HasTracepoint("sock_recv_length") && probes.HasTracepoint("sock_send_length") {
			opts.Path = PathSock
		}
	}
	w, err := pickWalk(opts.Walk, opts.Path)
	if err != nil {
		return nil, err
	}
	opts.Walk = w.walk
	if opts.Match != MatchMarker {
		opts.Match = MatchFrame
	}
	key := sharedKey{opts.Path, opts.Walk, opts.Match}
	sharedProbes.mu.Lock()
	defer sharedProbes.mu.Unlock()
	if sp := sharedProbes.m[key]; sp != nil {
		return sp, nil
	}
	sp := &shared{listeners: map[frame.Proto]listener{}}
	open := opts
	if opts.Match == MatchFrame {
		open.FramePorts = map[uint16]frame.Proto{}
	}
	for p := frame.NATS; p <= frame.Redis; p++ {
		fd, port, err := listenFree()
		if err != nil {
			closeListeners(sp)
			return nil, err
		}
		sp.listeners[p] = listener{fd, port}
		if open.FramePorts != nil {
			open.FramePorts[port] = p
		}
	}
	c, err := startCollector(open)
	if err != nil {
		closeListeners(sp)
		return nil, err
	}
	sp.c = c
	if sharedProbes.m == nil {
		sharedProbes.m = map[sharedKey]*shared{}
	}
	sharedProbes.m[key] = sp
	return sp, nil
}

func closeListeners(sp *shared) {
	for _, l := range sp.listeners {
		unix.Close(l.fd)
	}
}

// TestMain closes the shared probes after the tests: their Read loops
// must end without an error.
func TestMain(m *testing.M) {
	code := m.Run()
	for key, sp := range sharedProbes.m {
		sp.c.cancel()
		if err := <-sp.c.done; err != nil {
			fmt.Fprintf(os.Stderr, "shared probe %+v: Read: %v\n", key, err)
			code = 1
		}
		sp.c.tr.Close()
		closeListeners(sp)
	}
	os.Exit(code)
}
