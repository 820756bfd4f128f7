package capture

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// unavailablef is a Start error that lets the recording go on without the
// source; its message is only the reason, since the recording prefixes
// the source's name.
func unavailablef(format string, args ...any) error {
	return source.Unavailable(errors.New(strings.TrimPrefix(fmt.Sprintf(format, args...), "capture: ")))
}

// SourceOptions configure the "capture" source.
type SourceOptions struct {
	// Ifaces are the interfaces to capture on in the target's network
	// namespace; empty picks those that carry its listening sockets'
	// connections (see the package README).
	Ifaces []string
	// PcapPath, if set, receives the captured headers as pcapng.
	PcapPath string
	// SnapLen and MSS are as in Options.
	SnapLen int
	MSS     int
}

// Source is the source.Source "capture": it captures the TCP/IP headers of
// the target's listening ports in its network namespace for the whole
// recording and writes packets.csv (payload-size histogram per direction),
// net.csv (packets and bytes per window next to the messages that entered
// and left, ICPE'14 Fig. 10) and optionally a headers-only pcapng file.
type Source struct {
	opts SourceOptions

	mu      sync.Mutex
	env     *source.Env
	broker  *brokerNet
	why     string // how the interfaces were chosen
	capt    *Capture
	first   Snapshot
	windows []window
	result  *Result
}

// NewSource returns the "capture" source.
func NewSource(opts SourceOptions) *Source { return &Source{opts: opts} }

// Name implements source.Source.
func (s *Source) Name() string { return "capture" }

// Start finds the target's listening ports and starts capturing in its
// network namespace. A host where nothing can be captured gives an error
// matching source.ErrUnavailable; an interface of Ifaces that does not
// exist or is down, or an unwritable PcapPath, an error that ends the
// recording.
func (s *Source) Start(env *source.Env) error {
	if len(s.opts.Ifaces) > 0 {
		if err := CheckIfaces(process.NetNSPath(env.Target.PID), s.opts.Ifaces); IsBadInput(err) {
			return trimBadInput(err)
		}
	}
	b, err := findBroker(env.Target.PID)
	if err != nil {
		return err
	}
	ifaces, why := s.opts.Ifaces, "--iface"
	if len(ifaces) == 0 {
		ifaces, why = chooseIfaces(b.listeners, b.ifaces)
		if len(ifaces) == 0 {
			return unavailablef("no interface that could carry the broker's connections is up in %s (%s)", b.netns, why)
		}
	}
	c, err := Start(context.Background(), Options{
		Ifaces: ifaces, Ports: b.ports, DialPorts: b.dialPorts, NetNS: b.netns,
		SnapLen: s.opts.SnapLen, PcapPath: s.opts.PcapPath, MSS: s.opts.MSS,
	})
	if err != nil {
		if IsBadInput(err) {
			return trimBadInput(err)
		}
		return unavailablef("%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.env, s.broker, s.why, s.capt = env, b, why, c
	s.first = c.Snapshot()
	// net.csv's first window starts here, and the last ends when the
	// capture stops (Drain) if no Sample came.
	env.Timeline.Mark(s.netStart())
	return nil
}

// trimBadInput drops the package's prefix from a bad-input error: the
// recording names the source in front of the message.
func trimBadInput(err error) error {
	return badInput{trimmed{strings.TrimPrefix(err.Error(), "capture: "), err}}
}

// trimmed is an error with a shorter message that still wraps the
// original (outdir.ErrUnsafe among them).
type trimmed struct {
	msg string
	err error
}

func (e trimmed) Error() string { return e.msg }
func (e trimmed) Unwrap() error { return e.err }

// Watermark implements source.Source: the capture has no per-message data.
func (s *Source) Watermark() int64 { return math.MaxInt64 }

// Drain stops the capture and reads what its rings still hold.
func (s *Source) Drain() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capt == nil || s.result != nil {
		return nil
	}
	var err error
	s.result, err = s.capt.Stop()
	if s.result != nil {
		s.env.Timeline.Mark(s.result.End)
	}
	return err
}

// Finish writes packets.csv and net.csv.
func (s *Source) Finish(tl *source.Timeline) (source.Result, error) {
	// The recording calls Drain first and reports its error; a caller that
	// did not gets it as a warning.
	var drainWarn []string
	s.mu.Lock()
	drained := s.result != nil
	s.mu.Unlock()
	if !drained {
		if err := s.Drain(); err != nil {
			drainWarn = append(drainWarn, err.Error())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.result
	if r == nil {
		return source.Result{}, errors.New("capture was never started")
	}
	m := s.meta()
	res := source.Result{Meta: m, Warnings: append(drainWarn, r.warnings()...), Summary: r.summary(tl)}
	if s.broker.dialWarn != "" {
		res.Warnings = append(res.Warnings, s.broker.dialWarn)
	}

	if err := r.WriteCSV(s.env.Out, recfile.PacketsFile); err != nil {
		return res, err
	}
	res.Files = append(res.Files, recfile.PacketsFile)
	outside, n, err := s.writeNet(tl)
	m.Windows, m.MessagesOutsideWindows = n, outside
	if err != nil {
		return res, err
	}
	res.Files = append(res.Files, recfile.NetFile)
	if outside > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d message copies left the broker outside every net.csv window and are missing from msgs_out", outside))
	}
	return res, nil
}
