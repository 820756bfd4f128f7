// Package calibrate derives the parameters of the ICPE'14 §4 broker model
// (a queueing Petri net of the broker's thread pipeline) from a sweep: the
// §4.4 calibration the paper's authors did by hand, from the files
// `brokertrace sweep` leaves. Every parameter carries its unit, how it was
// derived with the numbers used, the steps it came from and whether it
// was measured (sweep), read from the kernel or platform.json, or assumed.
// docs/calibration.md explains each one.
package calibrate

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// Options tune the calibration; zero values take the defaults below.
type Options struct {
	// Platform is a platform.json whose constants override the kernel's.
	Platform string
	// Out is the calibration.json to write; "" is SWEEPDIR/calibration.json.
	// Demand files and pauses.csv go beside it.
	Out string
	// Pattern chooses the steps that calibrate the model (the paper used
	// the regular pattern); every step counts for coalescing.
	Pattern string
	// Near: steps whose achieved rate is at least Near × peak are "near
	// saturation", where stage demands are taken.
	Near float64
	// Plateau: the broker's utilisation has reached its plateau at a step
	// whose utilisation is at least Plateau × the highest.
	Plateau float64
	// ShareFrom is how the CPU outside the broker is measured: ShareBusy
	// (default, the paper's) or ShareIRQ.
	ShareFrom string
	// GCLog is a JVM unified GC log with the time decoration
	// (-Xlog:gc:file=FILE:time): when given, the GC threshold and pause
	// come from it, as in ICPE'14, and the kernel's pauses are compared.
	GCLog string
	// PauseMin is the shortest stall counted as a pause.
	PauseMin time.Duration
	// Penalties is k; 0: the number of timed places of the model.
	Penalties float64
	// PenaltiesMeasured makes k the measured drop in switches per message
	// from the rate of peak utilisation to the peak (c: the CPU one real
	// switch costs the broker), when the sweep shows one.
	PenaltiesMeasured bool
	// AllowLossy calibrates from steps whose recordings lost markers or
	// events (refused otherwise), with a warning for each.
	AllowLossy bool
	// AllowUnsaturated calibrates from a sweep none of whose steps of
	// Pattern saturated (refused otherwise), with a warning.
	AllowUnsaturated bool
	// Version is written into calibration.json.
	Version string
	// Now stamps calibration.json (tests fix it).
	Now func() time.Time
}

// Defaults of Options.
const (
	DefaultPattern  = "regular"
	DefaultNear     = 0.9
	DefaultPlateau  = 0.95
	DefaultPauseMin = 5 * time.Millisecond
)

func (o *Options) defaults() {
	if o.Pattern == "" {
		o.Pattern = DefaultPattern
	}
	if o.Near == 0 {
		o.Near = DefaultNear
	}
	if o.Plateau == 0 {
		o.Plateau = DefaultPlateau
	}
	if o.ShareFrom == "" {
		o.ShareFrom = ShareBusy
	}
	if o.PauseMin == 0 {
		o.PauseMin = DefaultPauseMin
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// ErrInput marks errors in what the calibration was given (no sweep, no
// finished step, steps of different brokers or hosts, a bad platform.json):
// the command exits 2 for them.
var ErrInput = errors.New("bad input")

func inputError(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInput, fmt.Sprintf(format, a...))
}

// step is one finished sweep step with its recording.
type step struct {
	recfile.SweepStep
	dir        string
	meta       recfile.Meta
	start, end int64 // the measured window
}

// Run calibrates the sweep in dir, writes calibration.json (and the
// demand files and pauses.csv beside it) and returns it.
func Run(dir string, opt Options) (*recfile.Calibration, error) {
	opt.defaults()
	if opt.ShareFrom != ShareBusy && opt.ShareFrom != ShareIRQ {
		return nil, inputError("--system-share-from %q: use %s or %s", opt.ShareFrom, ShareBusy, ShareIRQ)
	}
	var sw recfile.Sweep
	if err := recfile.ReadJSON(dir, recfile.SweepFile, &sw); err != nil {
		return nil, inputError("%s is not a sweep directory: %v", dir, err)
	}
	all, err := loadSteps(dir, &sw)
	if err != nil {
		return nil, err
	}
	var plat *recfile.Platform
	if opt.Platform != "" {
		plat = new(recfile.Platform)
		if err := recfile.ReadJSON(filepath.Dir(opt.Platform), filepath.Base(opt.Platform), plat); err != nil {
			return nil, inputError("--platform %s: %v", opt.Platform, err)
		}
	}
	out := opt.Out
	if out == "" {
		out = filepath.Join(dir, recfile.CalibrationFile)
	}
	// Opened before the work, so that an output brokertrace must not
	// write into is refused at once.
	od, err := outdir.Open(filepath.Dir(out))
	if err != nil {
		return nil, fmt.Errorf("--out %s: %w", out, err)
	}
	defer od.Close()
	idle, err := loadIdle(dir, &sw, all)
	if err != nil {
		return nil, err
	}
	c := &calibration{opt: opt, sweep: &sw, all: all, steps: ofPattern(all, opt.Pattern), idle: idle, plat: plat, outDir: od}
	if err := c.run(dir); err != nil {
		return nil, err
	}
	if err := recfile.WriteJSON(od, filepath.Base(out), c.cal, outdir.FilePerm); err != nil {
		return nil, err
	}
	return c.cal, nil
}

// loadSteps reads the meta.json of every finished step and refuses steps
// of different brokers or hosts: one model is of one broker on one machine.
func loadSteps(dir string, sw *recfile.Sweep) ([]*step, error) {
	var steps []*step
	for _, s := range sw.Steps {
		if s.Status != recfile.SweepDone {
			continue
		}
		st, err := loadStep(dir, s)
		if err != nil {
			return nil, inputError("step %d: %v", s.Index, err)
		}
		steps = append(steps, st)
	}
	if len(steps) == 0 {
		return nil, inputError("%s: no finished step in %s", dir, recfile.SweepFile)
	}
	return steps, sameBroker(steps)
}

// loadStep reads step s of the sweep in dir.
func loadStep(dir string, s recfile.SweepStep) (*step, error) {
	st := &step{SweepStep: s, dir: filepath.Join(dir, s.Dir)}
	if err := recfile.ReadJSON(st.dir, recfile.MetaFile, &st.meta); err != nil {
		return nil, err
	}
	st.start, st.end = s.WindowStartNs, s.WindowEndNs
	if st.end <= st.start {
		st.start, st.end = st.meta.StartNs, st.meta.EndNs
	}
	return st, nil
}

// sameBroker fails, naming the steps of each, when the steps recorded
// different brokers (comm and executable) or ran on different hosts.
func sameBroker(steps []*step) error {
	var keys []string
	groups := map[string][]int{}
	for _, s := range steps {
		k := fmt.Sprintf("broker %s (%s) on host %s", s.meta.Target.Comm, s.meta.Target.Exe, s.meta.Host.Hostname)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], s.Index)
	}
	if len(keys) == 1 {
		return nil
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %s recorded %s", plural(len(groups[k]), "step"), joinInts(groups[k]), k)
	}
	return inputError("the steps are of different brokers or hosts — %s; one calibration is of one broker on one host: sweep them apart",
		strings.Join(parts, "; "))
}

// ofPattern are the steps of one pattern, or all when none has it.
func ofPattern(steps []*step, pattern string) []*step {
	out := slices.DeleteFunc(slices.Clone(steps), func(s *step) bool { return s.Pattern != pattern })
	if len(out) == 0 {
		return steps
	}
	return out
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func indexes(steps []*step) []int {
	out := make([]int, len(steps))
	for i, s := range steps {
		out[i] = s.Index
	}
	return out
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
