// Package qpme writes the calibrated ICPE'14 §4 broker model as a QPME
// queueing Petri net (.qpe), so the calibration opens in QPME's editor and
// runs in its simulator SimQPN.
//
// The net is the paper's Fig. 8: an input place, the timed places
// accept-msg, process, dispatch (and accept-ack when the calibration has
// one) and system, the queue place holding one token per stored message,
// and the garbage collector's gc-idle and gc-active places with one
// collector token and a garbage token per message. An arrivals place
// stands for the measurement harness the paper nests the broker in: one
// token circulates through it and each pass puts a message (or a burst)
// into input at the sweep's rate.
//
// Every time in the file is in seconds (TimeUnit). Demands are Empirical
// distributions built from the calibration's demand files where there are
// some, Exponential with the stage's mean otherwise.
package qpme

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"

	"github.com/brokertrace/brokertrace/recfile"
)

// TimeUnit is the unit of every time and rate in the .qpe: demands and
// delays in seconds, Exponential rates (lambda) per second.
const TimeUnit = "s"

// Version is the qpme-version the file declares (the schema's release).
const Version = "2.1.0"

// Strategies: how the timed places are scheduled, since stock QPME has no
// strategy with the paper's context-switch cost c and quantum q.
const (
	// StrategyPS puts every timed place on one processor-sharing queue
	// with as many servers as the broker had CPUs: CPU contention between
	// the stages is modelled, c and q are not (PS is the limit q → 0 with
	// c = 0), and a stage may serve several messages at once.
	StrategyPS = "ps"
	// StrategyFCFS gives each stage a FCFS queue of one server, as a
	// thread serves its messages one by one; the stages then do not
	// compete for CPUs (right only with a CPU per thread).
	StrategyFCFS = "fcfs"
)

// Arrival patterns.
const (
	PatternRegular = "regular" // one message every 1/rate
	PatternBursty  = "bursty"  // Burst messages every Burst/rate
	PatternPoisson = "poisson" // exponential inter-arrival times
)

// Options say what to write beside the calibration.
type Options struct {
	Rate     float64 // msg/s arriving at input
	Pattern  string  // regular (default), bursty, poisson
	Burst    int     // messages per burst (bursty)
	Strategy string  // ps (default) or fcfs
	// RunLength is SimQPN's total run length in seconds of model time
	// (default 60); a tenth of it is ramp-up.
	RunLength float64
	// Bins of each Empirical distribution's histogram (default 50).
	Bins int
	// Demands is the directory of calibration.json, where the stages'
	// DemandFiles are; nil: Exponential demands with the stages' means.
	Demands fs.FS
	// Prefix names the distribution files (default "model"): PREFIX-PLACE-pdf.txt.
	Prefix string
}

// File is a file the model refers to, to be written next to the .qpe
// (SimQPN resolves relative names against the .qpe's directory).
type File struct {
	Name string
	Data []byte
}

// Stage places of the model, by the calibration's stage names.
const (
	PlaceAcceptMsg = "accept-msg"
	PlaceProcess   = "process"
	PlaceDispatch  = "dispatch"
	PlaceAcceptAck = "accept-ack"
	PlaceSystem    = "system"
)

func (o *Options) defaults() error {
	if o.Pattern == "" {
		o.Pattern = PatternRegular
	}
	if o.Strategy == "" {
		o.Strategy = StrategyPS
	}
	if o.RunLength == 0 {
		o.RunLength = 60
	}
	if o.Bins == 0 {
		o.Bins = 50
	}
	if o.Prefix == "" {
		o.Prefix = "model"
	}
	switch {
	case !(o.Rate > 0):
		return fmt.Errorf("qpme: arrival rate %v msg/s: give a positive rate", o.Rate)
	case !slices.Contains([]string{PatternRegular, PatternBursty, PatternPoisson}, o.Pattern):
		return fmt.Errorf("qpme: pattern %q: use regular, bursty or poisson", o.Pattern)
	case o.Pattern == PatternBursty && o.Burst < 1:
		return fmt.Errorf("qpme: bursty pattern with burst %d: give at least 1 message per burst", o.Burst)
	case o.Strategy != StrategyPS && o.Strategy != StrategyFCFS:
		return fmt.Errorf("qpme: strategy %q: use ps or fcfs", o.Strategy)
	case !(o.RunLength > 0) || o.Bins < 1:
		return fmt.Errorf("qpme: run length %v s and %d bins: both must be positive", o.RunLength, o.Bins)
	}
	return nil
}

// Write writes the model to w and returns the distribution files it
// refers to. Stages absent from the calibration, or with no demand, are
// left out of the chain; at least one of accept-msg, process and dispatch
// must be there.
func Write(w io.Writer, cal *recfile.Calibration, opt Options) ([]File, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	b := newBuilder(cal, opt)
	if err := b.build(); err != nil {
		return nil, err
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return nil, err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	comment := fmt.Sprintf(" ICPE'14 §4 broker model from %s (broker %s, CPUs %d); times in %s; arrivals %s at %v msg/s; strategy %s ",
		cal.Sweep, cal.Broker, cal.CPUs, TimeUnit, opt.Pattern, opt.Rate, opt.Strategy)
	if err := enc.EncodeToken(xml.Comment(comment)); err != nil {
		return nil, err
	}
	if err := enc.EncodeToken(xml.CharData("\n")); err != nil {
		return nil, err
	}
	if err := enc.Encode(b.net); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	_, err := io.WriteString(w, "\n")
	return b.files, err
}

// stage finds the calibration's stage for a place.
func stage(cal *recfile.Calibration, place string) (recfile.CalStage, bool) {
	i := slices.IndexFunc(cal.Stages, func(s recfile.CalStage) bool { return s.Name == place })
	if i < 0 {
		return recfile.CalStage{}, false
	}
	return cal.Stages[i], true
}

// gcParams returns the GC threshold (messages) and mean pause (s), and
// whether the calibration saw pauses at all.
func gcParams(cal *recfile.Calibration) (int, float64, bool) {
	th, ok1 := cal.Param(recfile.CalGCThreshold)
	pause, ok2 := cal.Param(recfile.CalGCPause)
	if !ok1 || !ok2 || th.Value < 1 || !(pause.Value > 0) {
		return 0, 0, false
	}
	return int(th.Value + 0.5), pause.Value / 1e9, true
}

var errNoStages = errors.New("qpme: the calibration lacks a stage")
