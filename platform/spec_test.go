package platform

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/recfile"
)

// TestBuiltinSpecs: every built-in parses, the context switch on one CPU
// through a pipe is the first context_switch_ns (calibrate takes the
// first), and every dependency runs before its dependant.
func TestBuiltinSpecs(t *testing.T) {
	all, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	ordered, err := Order(all)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, s := range ordered {
		pos[s.Name] = i
	}
	for _, s := range ordered {
		if sub := s.Analysis.Subtract; sub != nil && pos[sub.Experiment] > pos[s.Name] {
			t.Errorf("%s runs before %s, which it subtracts", s.Name, sub.Experiment)
		}
	}
	first := slices.IndexFunc(ordered, func(s *Spec) bool { return s.Detects == recfile.PlatformContextSwitch })
	if first < 0 || ordered[first].Variant != "same-cpu/pipe" {
		t.Errorf("the first context_switch_ns is not same-cpu/pipe")
	}
	var quick, full float64
	for _, s := range all {
		quick += s.reps(true).MaxSeconds
		full += s.reps(false).MaxSeconds
	}
	// The time caps bound the run (plus a child's start, ~0.1 s each).
	if quick+0.2*float64(len(all)) > 30 || full+0.2*float64(len(all)) > 180 {
		t.Errorf("time caps: quick %.1f s, full %.1f s; want < 30 s and < 180 s", quick, full)
	}
	for _, want := range []string{recfile.PlatformContextSwitch, recfile.PlatformTimeslice, "wakeup_latency_ns", "syscall_ns",
		"clock_step_ns", "nanosleep_overshoot_ns", "tcp_message_ns", "steal_fraction"} {
		if !slices.ContainsFunc(all, func(s *Spec) bool { return s.Detects == want }) {
			t.Errorf("no built-in experiment detects %s", want)
		}
	}
}

// TestSpecErrors: bad specs are refused with a message naming the fault.
func TestSpecErrors(t *testing.T) {
	good := `{"name":"x","detects":"x_ns","unit":"ns","tasks":[{"kind":"getppid"}],"repetitions":{"min":2,"max":5,"max_seconds":1},"analysis":{"method":"mean"}}`
	if _, err := Parse([]byte(good), "t"); err != nil {
		t.Fatal(err)
	}
	for bad, want := range map[string]string{
		strings.Replace(good, "getppid", "getpid", 1):                                  `unknown kind "getpid"`,
		strings.Replace(good, `"kind":"getppid"`, `"kind":"spin"`, 1):                  "measures nothing",
		strings.Replace(good, `"mean"`, `"mode"`, 1):                                   `method "mode"`,
		strings.Replace(good, `"min":2`, `"min":9`, 1):                                 "min ≤ max",
		strings.Replace(good, `"unit"`, `"units"`, 1):                                  "unknown field",
		strings.Replace(good, `{"kind":"getppid"}`, `{"kind":"getppid","cpu":"x"}`, 1): `cpu "x"`,
	} {
		_, err := Parse([]byte(bad), "t")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to say %q", bad, err, want)
		}
	}
	a := &Spec{Name: "a", Analysis: Analysis{Subtract: &Subtract{Experiment: "b"}}}
	b := &Spec{Name: "b", Analysis: Analysis{Subtract: &Subtract{Experiment: "a"}}}
	if _, err := Order([]*Spec{a, b}); err == nil || !strings.Contains(err.Error(), "circular") {
		t.Errorf("circular dependency: %v", err)
	}
	sel, err := Select([]*Spec{a, b, {Name: "c"}}, []string{"a"})
	if err != nil || len(sel) != 2 {
		t.Errorf("selecting a: %d specs %v, want a and the b it subtracts", len(sel), err)
	}
}

// TestFormatsDocPlatform: docs/formats.md explains every column of the
// samples files in its platform.json section.
func TestFormatsDocPlatform(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "formats.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## platform.json")
	if !ok {
		t.Fatal("docs/formats.md has no section ## platform.json")
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	for _, c := range recfile.Columns[recfile.PlatformSample]() {
		if !strings.Contains(sec, "`"+c+"`") {
			t.Errorf("docs/formats.md, platform.json: column %s of %s/NAME.csv not explained", c, recfile.PlatformSamplesDir)
		}
	}
}
