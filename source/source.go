// Package source is the contract between a recording and the probes and
// collectors that run in it: what a source is told when it starts, what it
// hands back, and the message timeline it is given at the end. It sits below
// every source (probes/*, capture, collect) and below record, so that data
// flows one way: record drives sources through this interface, and no
// source imports record.
package source

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/privs"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
)

// Env is what a Source knows about the recording it is part of.
type Env struct {
	Target *process.Process
	// Out is the recording directory: every file a source writes is
	// created through it (outdir.Discard under --discard).
	Out *outdir.Dir
	// Start is CLOCK_MONOTONIC ns when the socket probe went live.
	Start int64
	// Window is the length of the windows of the time series (sched.csv,
	// cpu.csv, net.csv…).
	Window time.Duration
	// Timeline counts the messages as the recording reads them. A source
	// whose files count messages per window marks each window's edges
	// on it (Timeline.Mark) as it samples, since only counts between
	// marked edges are kept; nil outside a recording.
	Timeline *Timeline
	// MaxInBroker is the longest a message can stay in the broker and
	// still be matched (the matcher's id TTL): per-message history older
	// than that behind the newest message is never asked for. 0: no
	// bound.
	MaxInBroker time.Duration
	// OnSwitch, if not nil, is given every context switch of the target
	// that the scheduler source reads, on that source's reader goroutine,
	// concurrently with everything else: it must be safe for that and
	// return quickly.
	OnSwitch func(SchedSwitch)
}

// ErrUnavailable is wrapped by a Source's Start error when it cannot run on
// this host (no cgroup controller, no capture interface…). The recording goes
// on without the source and meta.json says why; any other Start error ends
// the recording.
var ErrUnavailable = errors.New("not available on this host")

// Unavailable returns err as a Start error that lets the recording go on
// without the source: it matches ErrUnavailable and says only err's words,
// since the recording prefixes the source's name.
func Unavailable(err error) error { return unavailable{err} }

type unavailable struct{ error }

func (unavailable) Is(target error) bool { return target == ErrUnavailable }
func (e unavailable) Unwrap() error      { return e.error }

// A Prober is a Source that runs an eBPF probe: once started, it says on
// which hook path and why, so that a recording can say so before it runs
// (no fallback is silent).
type Prober interface {
	ProbePath() recfile.ProbePath
}

// A Privileged is a Source that goes on doing, after Start, something
// that may need a capability. A recording drops every capability once its
// sources have started (record.Config.KeepPrivileges), keeping only those
// the Needs' checks show are needed on this host for this target; a source
// that is not Privileged must need none after Start.
type Privileged interface {
	Needs() []privs.Need
}

// A Source is a probe or collector that runs beside the socket probe for the
// whole recording: scheduler probes, CPU accounting, packet capture. Data
// flows one way: a Source reads its kernel or /proc data, the recording
// hands it the message timeline at the end, and it writes its own files.
//
// The recording calls Start once, then Sample every Env.Window, then Drain
// and Finish once. Watermark and, for Annotators, Annotate are called from
// the goroutine that reads the socket probe, concurrently with Sample and the
// source's own goroutines: they must be safe for that.
type Source interface {
	// Name is the source's key in meta.json ("sched", "cpu", "capture").
	Name() string
	Start(env *Env) error
	// Sample is called every window with the time the window ended.
	Sample(now int64)
	// Watermark is a time before which every event of the source has been
	// consumed; sources without per-message data return NoWatermark.
	Watermark() int64
	// Drain stops collecting and consumes every event in flight; Annotate
	// must still answer afterwards.
	Drain() error
	// Finish writes the source's files into the recording directory. tl
	// holds the times every message entered and left the broker.
	Finish(tl *Timeline) (Result, error)
}

// NoWatermark is the watermark of a source without per-message data: it
// never holds a row back.
const NoWatermark = math.MaxInt64

// Result is what a Source leaves in the recording.
type Result struct {
	Files    []string // written into the recording directory
	Meta     any      // the source's part of meta.json
	Warnings []string // every loss or gap, in words
	// Summary is the source's headline for the terminal summary, one line
	// without the source's name ("4.98 context switches per message…").
	Summary string
}

// An Annotator is a Source that adds columns to messages.csv. A row is
// annotated only once every Source's watermark has passed its t_out, so the
// events it depends on have all been read.
type Annotator interface {
	Columns() []string
	// Annotate appends one value per column for m, each preceded by a
	// comma. An unknown value is an empty field.
	Annotate(dst []byte, m *correlate.Message) []byte
}

// FormatNs prints a duration in ns with a unit that fits it, for the
// sources' headlines and the live line.
func FormatNs(ns int64) string {
	switch {
	case ns < 1_000:
		return fmt.Sprintf("%dns", ns)
	case ns < 1_000_000:
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	case ns < 1_000_000_000:
		return fmt.Sprintf("%.2fms", float64(ns)/1e6)
	default:
		return fmt.Sprintf("%.3fs", float64(ns)/1e9)
	}
}

// A Spec is one entry of the table of sources a recording can run: the
// source's flags and how to make it from them. Each Spec binds its flags
// to options of its own, so two commands built from two tables never share
// state.
type Spec struct {
	// Name is the source's key in meta.json.
	Name string
	// Flags registers the source's flags on record and run.
	Flags func(fl *pflag.FlagSet)
	// New returns the source for a recording of target as the flags say,
	// nil when they turn it off, or an error for bad flag values.
	New func(target *process.Process) (Source, error)
}

// Switch is the Spec of a source that has one flag, on by default, to turn
// it off.
func Switch(name, flag, usage string, make func() Source) Spec {
	var on bool
	return Spec{
		Name:  name,
		Flags: func(fl *pflag.FlagSet) { fl.BoolVar(&on, flag, true, usage) },
		New: func(*process.Process) (Source, error) {
			if !on {
				return nil, nil
			}
			return make(), nil
		},
	}
}
