// Package platform runs goal-oriented platform experiments (Ginpex, QoSA
// 2011): each experiment is a declarative specification — tasks, their CPU
// pinning and priority, load, sensor, warm-up, repetitions and analysis —
// kept apart from the code that runs it, and detects one property a broker
// model needs (context-switch cost, timeslice, wake-up latency…). The
// built-in experiments are JSON files embedded from experiments/; a user's
// file is read the same way, so adding one needs no recompiling.
//
// The tasks run in a child process of the same binary (see child.go): its
// runtime has the garbage collector off and no other goroutines, so
// neither the collector nor the parent's progress output lands inside a
// measurement.
package platform

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

//go:embed experiments/*.json
var builtin embed.FS

// Spec is one experiment.
type Spec struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Detects is the property's name in platform.json, Variant tells
	// experiments that detect the same property apart, Unit its unit.
	Detects string `json:"detects"`
	Variant string `json:"variant,omitempty"`
	Unit    string `json:"unit"`
	// Tasks: the first is the measured one (it carries the sensor); the
	// others are load.
	Tasks []Task `json:"tasks"`
	// Sensor says what one sample is, in SampleUnit.
	Sensor      string      `json:"sensor"`
	SampleUnit  string      `json:"sample_unit"`
	Warmup      int         `json:"warmup"` // samples discarded first
	Repetitions Repetitions `json:"repetitions"`
	// Quick replaces Repetitions under --quick.
	Quick    *Repetitions `json:"quick,omitempty"`
	Analysis Analysis     `json:"analysis"`
	// Plausible is the range docs/platform.md gives for a sane machine.
	Plausible [2]float64 `json:"plausible"`
	// Source is where the spec came from ("built-in" or a path).
	Source string `json:"-"`
}

// Task is one group of identical threads.
type Task struct {
	Kind string `json:"kind"`
	// Count threads (default 1); with PerCPU, Count on each CPU of CPU.
	Count  int  `json:"count,omitempty"`
	PerCPU bool `json:"per_cpu,omitempty"`
	// CPU pins the threads: "same" (the experiment's CPU), "other" (one
	// other CPU), "others" (every other CPU), "all", or a list "0,2-3".
	// PeerCPU pins the partner thread of a two-thread kind.
	CPU     string `json:"cpu,omitempty"`
	PeerCPU string `json:"peer_cpu,omitempty"`
	// Nice and Policy ("other", "batch", "idle") of every thread.
	Nice   int    `json:"nice,omitempty"`
	Policy string `json:"policy,omitempty"`
	// Clock times a batched kind's samples: "wall" (default) or "cpu",
	// the process's CPU time: with every thread pinned to one CPU the CPU
	// is never idle, so on a quiet machine the two agree, and on a shared
	// one CPU time leaves out the other tasks' slices that wall time counts.
	Clock string `json:"clock,omitempty"`
	// Params are the kind's load parameters (see kinds).
	Params map[string]float64 `json:"params,omitempty"`
}

// Repetitions is the stopping rule: at least Min samples and MinSeconds,
// then stop when the 95% confidence interval's half-width is within
// CIPercent of the mean, or at Max samples, or after MaxSeconds.
type Repetitions struct {
	Min        int     `json:"min"`
	Max        int     `json:"max"`
	CIPercent  float64 `json:"ci_percent"`
	MinSeconds float64 `json:"min_seconds,omitempty"`
	MaxSeconds float64 `json:"max_seconds"`
}

// Analysis turns the samples into the property's value.
type Analysis struct {
	// Method: mean, median, min, kmeans2 (distance between the medians of
	// the two clusters), extra (a figure the task reported, Extra).
	Method string `json:"method"`
	// Scale multiplies the statistic (0.5: a round trip holds two switches).
	Scale float64 `json:"scale,omitempty"`
	// Offset is added to every sample first (-request: an overshoot).
	Offset float64 `json:"offset,omitempty"`
	// Subtract is another experiment's property, times Factor, taken off
	// the value: the experiment depends on it and runs after it.
	Subtract *Subtract `json:"subtract,omitempty"`
	Extra    string    `json:"extra,omitempty"`
}

// Subtract names a property of another experiment.
type Subtract struct {
	Experiment string  `json:"experiment"`
	Factor     float64 `json:"factor"`
}

// Builtin returns the built-in experiments in their run order.
func Builtin() ([]*Spec, error) {
	return loadFS(builtin, "experiments", "built-in")
}

// LoadPath reads one spec file or every *.json in a directory.
func LoadPath(path string) ([]*Spec, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return loadFS(os.DirFS(path), ".", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(b, path)
	if err != nil {
		return nil, err
	}
	return []*Spec{s}, nil
}

func loadFS(fsys fs.FS, dir, source string) ([]*Spec, error) {
	names, err := fs.Glob(fsys, filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no *.json experiment", source)
	}
	slices.Sort(names)
	var specs []*Spec
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		src := source
		if source != "built-in" {
			src = filepath.Join(source, filepath.Base(n))
		}
		s, err := Parse(b, src)
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// Parse reads and checks one spec; unknown fields are errors, so a typo
// does not silently fall back to a default.
func Parse(b []byte, source string) (*Spec, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	s.Source = source
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%s: experiment %q: %w", source, s.Name, err)
	}
	return &s, nil
}

func (s *Spec) check() error {
	var errs []error
	if s.Name == "" || strings.ContainsAny(s.Name, " /\\") {
		errs = append(errs, errors.New("name must be non-empty, without spaces or slashes"))
	}
	if s.Detects == "" || s.Unit == "" {
		errs = append(errs, errors.New("detects and unit are required"))
	}
	if len(s.Tasks) == 0 {
		errs = append(errs, errors.New("no tasks"))
	}
	for i, t := range s.Tasks {
		k, ok := kinds[t.Kind]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("task %d: unknown kind %q (known: %s)", i, t.Kind, strings.Join(KindNames(), ", ")))
		case i == 0 && k.measure == nil:
			errs = append(errs, fmt.Errorf("task 0 (the measured one): kind %q measures nothing", t.Kind))
		case i > 0 && k.load == nil:
			errs = append(errs, fmt.Errorf("task %d: kind %q cannot be load", i, t.Kind))
		}
		if _, err := parseCPUs(t.CPU, 0, 2); t.CPU != "" && err != nil {
			errs = append(errs, fmt.Errorf("task %d: %w", i, err))
		}
		if !slices.Contains([]string{"", "wall", "cpu"}, t.Clock) {
			errs = append(errs, fmt.Errorf("task %d: clock %q: want wall or cpu", i, t.Clock))
		}
		if !slices.Contains([]string{"", "other", "batch", "idle"}, t.Policy) {
			errs = append(errs, fmt.Errorf("task %d: policy %q: want other, batch or idle", i, t.Policy))
		}
	}
	r := s.Repetitions
	if r.Min < 2 || r.Max < r.Min || r.MaxSeconds <= 0 {
		errs = append(errs, errors.New("repetitions: want 2 ≤ min ≤ max and max_seconds > 0"))
	}
	if !slices.Contains([]string{"mean", "median", "min", "kmeans2", "extra"}, s.Analysis.Method) {
		errs = append(errs, fmt.Errorf("analysis: method %q: want mean, median, min, kmeans2 or extra", s.Analysis.Method))
	}
	if s.Analysis.Method == "extra" && s.Analysis.Extra == "" {
		errs = append(errs, errors.New("analysis: method extra needs extra"))
	}
	return errors.Join(errs...)
}

// reps is the stopping rule in force.
func (s *Spec) reps(quick bool) Repetitions {
	if quick && s.Quick != nil {
		return *s.Quick
	}
	return s.Repetitions
}

// Select picks the named experiments from all, in all's order, plus the
// experiments they subtract (Ginpex's dependencies); no names: all.
func Select(all []*Spec, names []string) ([]*Spec, error) {
	if len(names) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	var add func(n string) error
	add = func(n string) error {
		i := slices.IndexFunc(all, func(s *Spec) bool { return s.Name == n })
		if i < 0 {
			return fmt.Errorf("no experiment %q (see --list)", n)
		}
		if want[n] {
			return nil
		}
		want[n] = true
		if sub := all[i].Analysis.Subtract; sub != nil {
			return add(sub.Experiment)
		}
		return nil
	}
	for _, n := range names {
		if err := add(n); err != nil {
			return nil, err
		}
	}
	return slices.DeleteFunc(slices.Clone(all), func(s *Spec) bool { return !want[s.Name] }), nil
}

// Order puts every experiment after the ones it subtracts; a missing or
// circular dependency is an error.
func Order(specs []*Spec) ([]*Spec, error) {
	byName := map[string]*Spec{}
	for _, s := range specs {
		if byName[s.Name] != nil {
			return nil, fmt.Errorf("experiment %q defined twice (%s, %s)", s.Name, byName[s.Name].Source, s.Source)
		}
		byName[s.Name] = s
	}
	var out []*Spec
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(s *Spec) error
	visit = func(s *Spec) error {
		switch state[s.Name] {
		case 1:
			return fmt.Errorf("experiment %q: circular subtract", s.Name)
		case 2:
			return nil
		}
		state[s.Name] = 1
		if sub := s.Analysis.Subtract; sub != nil {
			d := byName[sub.Experiment]
			if d == nil {
				return fmt.Errorf("experiment %q subtracts %q, which is not selected or defined", s.Name, sub.Experiment)
			}
			if err := visit(d); err != nil {
				return err
			}
		}
		state[s.Name] = 2
		out = append(out, s)
		return nil
	}
	for _, s := range specs {
		if err := visit(s); err != nil {
			return nil, err
		}
	}
	return out, nil
}
