package sim

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/recfile"
)

// DemandKind is how a stage's CPU demand per token is drawn.
type DemandKind int

const (
	// Empirical draws uniformly from measured samples (a bootstrap), as
	// QPME's Empirical distribution does.
	Empirical DemandKind = iota
	// Exponential draws from an exponential distribution with the mean.
	Exponential
	// Deterministic is the mean, always.
	Deterministic
)

var demandNames = []string{"empirical", "exponential", "deterministic"}

func (k DemandKind) String() string {
	if int(k) < len(demandNames) {
		return demandNames[k]
	}
	return fmt.Sprintf("DemandKind(%d)", int(k))
}

// ParseDemandKind reads "empirical", "exponential" or "deterministic".
func ParseDemandKind(s string) (DemandKind, error) {
	for i, n := range demandNames {
		if s == n {
			return DemandKind(i), nil
		}
	}
	return 0, fmt.Errorf("demand %q: give empirical, exponential or deterministic", s)
}

// Demand is a stage's CPU demand per token, in ns.
type Demand struct {
	Kind    DemandKind
	MeanNs  float64
	Samples []float64 // Empirical only
}

func (d *Demand) sample(r *rand.Rand) float64 {
	switch d.Kind {
	case Exponential:
		return r.ExpFloat64() * d.MeanNs
	case Empirical:
		return d.Samples[r.IntN(len(d.Samples))]
	}
	return d.MeanNs
}

// Stage is one timed place: a thread that serves its tokens in order.
type Stage struct {
	Name string
	// Outside: CPU work outside the broker (the system place). It counts
	// in system utilisation, not in the broker's, and not in latency.
	// Outside stages come after every broker stage.
	Outside bool
	Demand  Demand
}

// Model is the broker model to simulate.
type Model struct {
	Stages []Stage
	CPUs   int
	// SwitchPenaltyNs is c: added to the first token a CPU serves after it
	// ran another thread.
	SwitchPenaltyNs float64
	// WakePenaltyNs is the CPU a thread spends because it woke a CPU that
	// had parked: the exit from idle, the kernel's wake-up and switch,
	// the runtime's unpark. It is added to the first token the thread
	// serves, however many tokens are then waiting: the cost is per
	// wake-up, not per message (ICPE'14 §3.2). A thread woken onto a busy
	// CPU, which waits its turn, pays nothing.
	WakePenaltyNs float64
	// SpinNs: a CPU left with nothing to run keeps polling this long for
	// new work before it parks (a runtime's spinning, adaptive spinning
	// before a futex wait). The polling is the broker's CPU time; a token
	// that arrives during it is taken without a wake-up. 0: park at once.
	SpinNs float64
	// WakeLatencyNs: a thread woken onto a CPU that had parked starts
	// this much later (the CPU's exit from idle, the wake-up's IPI); the
	// CPU is not busy meanwhile, but it is taken, and tokens queue up.
	WakeLatencyNs float64
	// PathLatencyNs is added to every message's latency, not to any
	// CPU: the time a message's path through the broker takes that the
	// stages leave out (the hand-offs between its threads).
	PathLatencyNs float64
	// SystemWakeNs is the CPU outside the broker per wake-up of a broker
	// thread (the kernel's exit from idle, its wake-up and switch): it is
	// added to the system's utilisation, not the broker's, and takes no
	// CPU from the stages — it is paid where a CPU had nothing to do.
	SystemWakeNs float64
	// BackgroundUtil is the broker's CPU with no message at all (timers,
	// housekeeping), in CPUs; it is added to the broker's utilisation,
	// which stays within CPUs: it takes the time the stages leave, which
	// a CPU that never parks spends polling otherwise. It takes no
	// capacity from the stages: their demands, fitted at the peak, hold
	// the background's share there.
	BackgroundUtil float64
	// QuantumNs is q: a thread that has run this long while another
	// thread waits yields at its next token boundary. 0: never.
	QuantumNs float64
	// GCThreshold messages entering the broker start a pause of GCPauseNs
	// (0: no pauses). During a pause no message enters and no broker
	// thread starts a token (a stop-the-world collection reached at the
	// threads' next safepoint, a token boundary); outside stages go on.
	GCThreshold int
	GCPauseNs   float64
	// QueueCapacity bounds the messages inside the broker (entered, not
	// yet through the last broker stage); arrivals beyond it wait outside
	// (flow control). 0: unbounded.
	QueueCapacity int
}

// Validate says what makes m impossible to simulate.
func (m *Model) Validate() error {
	var errs []error
	if m.CPUs < 1 {
		errs = append(errs, fmt.Errorf("cpus %d: need at least 1", m.CPUs))
	}
	broker := 0
	for i, s := range m.Stages {
		d := s.Demand
		switch {
		case !s.Outside && i > broker:
			errs = append(errs, fmt.Errorf("stage %s: broker stages must come before outside ones", s.Name))
		case !s.Outside:
			broker++
		}
		if d.MeanNs < 0 || math.IsNaN(d.MeanNs) || math.IsInf(d.MeanNs, 0) {
			errs = append(errs, fmt.Errorf("stage %s: mean demand %v ns", s.Name, d.MeanNs))
		}
		if d.Kind == Empirical && len(d.Samples) == 0 {
			errs = append(errs, fmt.Errorf("stage %s: empirical demand without samples", s.Name))
		}
	}
	if broker == 0 {
		errs = append(errs, errors.New("no broker stage: latency needs at least one"))
	}
	for _, v := range []float64{m.SwitchPenaltyNs, m.WakePenaltyNs, m.SpinNs, m.SystemWakeNs, m.BackgroundUtil, m.QuantumNs, m.GCPauseNs} {
		if v < 0 || math.IsNaN(v) {
			errs = append(errs, fmt.Errorf("negative or NaN constant %v", v))
		}
	}
	if m.GCThreshold < 0 || m.QueueCapacity < 0 {
		errs = append(errs, errors.New("negative gc threshold or queue capacity"))
	}
	return errors.Join(errs...)
}

// FromCalibration builds the model calibration.json describes; dir is the
// directory calibration.json is in (demand files are relative to it).
// kind Empirical reads each stage's DemandFile; a stage without one falls
// back to an exponential demand with its mean, and a warning says so.
func FromCalibration(cal *recfile.Calibration, dir string, kind DemandKind) (*Model, []string, error) {
	m := &Model{CPUs: cal.CPUs}
	var warns []string
	if m.CPUs < 1 {
		warns = append(warns, fmt.Sprintf("calibration says %d CPUs: simulating 1", cal.CPUs))
		m.CPUs = 1
	}
	for _, cs := range cal.Stages {
		st := Stage{Name: cs.Name, Outside: cs.Role == "outside", Demand: Demand{Kind: kind, MeanNs: cs.MeanNs}}
		if kind == Empirical {
			samples, err := readDemands(dir, cs.DemandFile)
			if err != nil || len(samples) == 0 {
				warns = append(warns, fmt.Sprintf("stage %s: no demand samples (%v): exponential with mean %.0f ns instead", cs.Name, orEmpty(err), cs.MeanNs))
				st.Demand.Kind = Exponential
			}
			st.Demand.Samples = samples
		}
		m.Stages = append(m.Stages, st)
	}
	param := func(name string) float64 {
		p, ok := cal.Param(name)
		if !ok {
			warns = append(warns, fmt.Sprintf("calibration has no %s: 0 assumed", name))
		}
		return p.Value
	}
	m.SwitchPenaltyNs = param(recfile.CalSwitchPenalty)
	m.QuantumNs = param(recfile.CalQuantum)
	opt := func(name string) float64 { p, _ := cal.Param(name); return p.Value }
	m.WakePenaltyNs, m.SpinNs, m.BackgroundUtil = opt(recfile.CalWakePenalty), opt(recfile.CalSpin), opt(recfile.CalBackground)
	m.WakeLatencyNs, m.PathLatencyNs = opt(recfile.CalWakeLatency), opt(recfile.CalPathLatency)
	m.SystemWakeNs = opt(recfile.CalSystemWakeCost)
	m.GCThreshold = int(math.Round(param(recfile.CalGCThreshold)))
	m.GCPauseNs = param(recfile.CalGCPause)
	if m.GCThreshold == 0 {
		m.GCPauseNs = 0
	}
	return m, warns, m.Validate()
}

func orEmpty(err error) string {
	if err == nil {
		return "file empty"
	}
	return err.Error()
}

// readDemands reads a demand file: one demand_ns per line; a first line
// that is not a number is a header.
func readDemands(dir, name string) ([]float64, error) {
	if name == "" {
		return nil, errors.New("no demand_file")
	}
	f, err := recfile.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []float64
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		switch {
		case err != nil && line == 1:
			continue
		case err != nil || v < 0:
			return nil, fmt.Errorf("%s:%d: %q is not a demand in ns", name, line, s)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}
