package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/brokertrace/brokertrace/collect"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// sweeper is one sweep under way.
type sweeper struct {
	cfg    Config
	out    *outdir.Dir
	sw     *recfile.Sweep
	broker *broker // run mode
	prog   *progress
}

// Run runs the sweep, resuming the one in cfg.Out when it was asked with
// the same options, and returns sweep.json as written last. In run mode
// the calling goroutine must stay on its OS thread for the whole call
// (runtime.LockOSThread): the broker dies with the thread that forked it
// when brokertrace dies without cleaning up.
func Run(ctx context.Context, cfg Config) (*recfile.Sweep, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	out, err := outdir.Open(cfg.Out)
	if err != nil {
		return nil, fmt.Errorf("%w: --out %s: %w", ErrConfig, cfg.Out, err)
	}
	defer out.Close()
	sw, err := resume(cfg, out)
	if err != nil {
		return nil, err
	}
	_, sw.Recorder = cfg.recorderFlags()
	sw.Knee = knee(cfg.Options, sw.Steps) // of the steps a resumed sweep kept
	s := &sweeper{cfg: cfg, out: out, sw: sw}
	if len(cfg.Options.Command) > 0 {
		b, err := startBroker(cfg.Options, out, cfg.Grace)
		if err != nil {
			return nil, err
		}
		defer b.stop()
		s.broker = b
		sw.Broker, sw.BrokerCgroup = "started once for every step, in a cgroup of its own", b.group.Path
	}
	if err := s.write(); err != nil {
		return sw, err
	}
	total := s.pending()
	if cfg.Options.Search {
		total = 0 // the search decides as it goes
	}
	s.prog = newProgress(cfg.Progress, total, time.Duration(cfg.Options.StepNs))
	if cfg.Options.IdleNs > 0 && (sw.Idle == nil || sw.Idle.Status != recfile.SweepDone) {
		s.prog.after = time.Duration(cfg.Options.IdleNs) + idleSettle + stepOverhead
	}
	err = s.steps(ctx)
	if err == nil {
		err = s.idle(ctx)
	}
	sw.EndWall = time.Now().UTC().Format(time.RFC3339)
	if werr := s.write(); err == nil {
		err = werr
	}
	return sw, err
}

// steps runs every step not done yet: the given ladder's, stopping the
// climb after the first saturated step unless Beyond, or the knee
// search's, chosen one rate at a time.
func (s *sweeper) steps(ctx context.Context) error {
	if s.cfg.Options.Search {
		return s.search(ctx)
	}
	s.sw.SaturatedAt = nil
	lastErr := ""
	for i := range s.sw.Steps {
		st := &s.sw.Steps[i]
		if s.sw.SaturatedAt != nil && !s.cfg.Options.Beyond {
			if st.Status != recfile.SweepDone {
				*st = recfile.SweepStep{Index: st.Index, Dir: st.Dir, Pattern: st.Pattern, Burst: st.Burst, RateAsked: st.RateAsked,
					Status: recfile.SweepSkipped, Error: fmt.Sprintf("past saturation at step %d", *s.sw.SaturatedAt)}
			}
			continue
		}
		if st.Status != recfile.SweepDone {
			if err := s.runPending(ctx, st); err != nil {
				return err
			}
			if st.Status == recfile.SweepFailed && lastErr == st.Error {
				// The same failure twice in a row is no passing hiccup
				// (a record flag record refuses, a binary gone): stop
				// rather than fail every step the same way.
				return fmt.Errorf("steps %d and %d failed alike, sweep stopped: %s", i-1, i, st.Error)
			}
			lastErr = st.Error
		}
		if st.Status == recfile.SweepDone && st.Saturated && s.sw.SaturatedAt == nil {
			s.sw.SaturatedAt = &st.Index
		}
	}
	return s.write()
}

// search runs the knee search: the steps planned so far, then those
// nextSearch chooses from them, until it chooses none. A failed step
// stops the search, whose next rate depends on it; a rerun retries it.
func (s *sweeper) search(ctx context.Context) error {
	s.saturation()
	for {
		i := slices.IndexFunc(s.sw.Steps, func(st recfile.SweepStep) bool { return st.Status != recfile.SweepDone })
		if i < 0 {
			next := nextSearch(s.cfg.Options, s.sw.Steps)
			if len(next) == 0 {
				return s.write()
			}
			s.sw.Steps = append(s.sw.Steps, next...)
			continue
		}
		st := &s.sw.Steps[i]
		if err := s.runPending(ctx, st); err != nil {
			return err
		}
		if st.Status == recfile.SweepFailed {
			return fmt.Errorf("step %d (%s) failed, and the knee search needs its result: rerun the same command to retry it: %s", i, st.Dir, st.Error)
		}
		s.saturation()
		if err := s.write(); err != nil {
			return err
		}
	}
}

// runPending runs a step not done yet and rewrites sweep.json; its error
// ends the sweep (interrupted, the broker gone, sweep.json unwritable).
func (s *sweeper) runPending(ctx context.Context, st *recfile.SweepStep) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w before step %d", ErrInterrupted, st.Index)
	}
	if s.broker != nil && s.broker.exited() {
		return fmt.Errorf("%w: %s exited during the sweep (see %s)", ErrBroker, s.cfg.Options.Command[0], filepath.Join(s.cfg.Out, "broker.log"))
	}
	s.runStep(ctx, st)
	s.sw.Knee = knee(s.cfg.Options, s.sw.Steps)
	if err := s.write(); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w during step %d (%s); rerun the same command to resume", ErrInterrupted, st.Index, st.Dir)
	}
	return nil
}

// saturation sets a knee search's SaturatedAt (its first done step that
// saturated: the search runs its steps in order) and Knee.
func (s *sweeper) saturation() {
	s.sw.SaturatedAt = nil
	if i := slices.IndexFunc(s.sw.Steps, func(st recfile.SweepStep) bool { return st.Status == recfile.SweepDone && st.Saturated }); i >= 0 {
		s.sw.SaturatedAt = &s.sw.Steps[i].Index
	}
	s.sw.Knee = knee(s.cfg.Options, s.sw.Steps)
}

// runStep runs one step and fills it, never returning an error: a step
// that fails is marked so, and the sweep goes on (a rerun retries it).
func (s *sweeper) runStep(ctx context.Context, st *recfile.SweepStep) {
	s.prog.begin(st)
	start := time.Now()
	pid := 0
	if s.broker != nil {
		pid = s.broker.pid
	}
	fresh := recfile.SweepStep{Index: st.Index, Dir: st.Dir, Pattern: st.Pattern, Burst: st.Burst, RateAsked: st.RateAsked, Phase: st.Phase}
	*st = fresh
	err := s.measure(ctx, st, pid)
	st.WallNs = time.Since(start).Nanoseconds()
	if err == nil {
		err = summarize(stepPath(s.cfg.Out, st), st, s.cfg.Options)
	}
	if err != nil {
		wall := st.WallNs
		*st = fresh
		st.Status, st.Error, st.WallNs = recfile.SweepFailed, err.Error(), wall
	} else {
		st.Status = recfile.SweepDone
	}
	s.prog.end(st)
}

// pending counts the steps this run has to make (at most).
func (s *sweeper) pending() int {
	n := 0
	for _, st := range s.sw.Steps {
		if st.Status != recfile.SweepDone {
			n++
		}
	}
	return n
}

func (s *sweeper) write() error {
	// The broker's URL may hold credentials.
	return recfile.WriteJSON(s.out, recfile.SweepFile, s.sw, outdir.SecretPerm)
}

// resume makes the sweep to run: a fresh one, or the stored one with its
// complete steps kept.
func resume(cfg Config, out *outdir.Dir) (*recfile.Sweep, error) {
	fresh := &recfile.Sweep{Tool: "brokertrace", Version: cfg.Version, Host: host(), Options: cfg.Options,
		StartWall: time.Now().UTC().Format(time.RFC3339), Steps: plan(cfg.Options), Scheduler: collect.SchedSettings(),
		Broker: "attached (" + cfg.Options.Target + ")", Runs: 1, Warnings: []string{}}
	var old recfile.Sweep
	err := recfile.ReadJSON(cfg.Out, recfile.SweepFile, &old)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fresh, nil
	case err != nil && !cfg.Restart:
		return nil, fmt.Errorf("%w: %s is unreadable (%v): give --restart to start the sweep over", ErrOptionsDiffer, filepath.Join(cfg.Out, recfile.SweepFile), err)
	case err != nil:
		return fresh, nil
	}
	if diff := optionsDiff(old.Options, cfg.Options); diff != "" {
		if !cfg.Restart {
			return nil, fmt.Errorf("%w: %s holds a sweep asked with other options (%s): give the same options to resume it, --restart to start over, or another --out",
				ErrOptionsDiffer, filepath.Join(cfg.Out, recfile.SweepFile), diff)
		}
		for _, st := range old.Steps {
			if err := out.RemoveAll(st.Dir); err != nil {
				return nil, err
			}
		}
		return fresh, nil
	}
	if cfg.Restart {
		for _, st := range old.Steps {
			old.Steps[st.Index].Status = recfile.SweepPending
		}
	}
	fresh.StartWall, fresh.Runs = old.StartWall, old.Runs+1
	fresh.Warnings = append(fresh.Warnings, old.Warnings...)
	var m recfile.Meta
	if old.Idle != nil && old.Idle.Status == recfile.SweepDone && !cfg.Restart && recfile.ReadJSON(stepPath(cfg.Out, old.Idle), recfile.MetaFile, &m) == nil {
		fresh.Idle = old.Idle
	}
	if cfg.Options.Search {
		return fresh, resumeSearch(cfg.Out, out, fresh, old.Steps)
	}
	for i, st := range old.Steps {
		if i < len(fresh.Steps) && st.Dir == fresh.Steps[i].Dir && st.Status == recfile.SweepDone && complete(stepPath(cfg.Out, &st)) {
			fresh.Steps[i] = st
		}
	}
	return fresh, nil
}

// resumeSearch keeps the steps of an interrupted knee search up to its
// first step not done with complete files, and removes the directories of
// the rest: the search chooses the next rate from the done steps alone,
// so it goes on as the interrupted run would have, and reruns from there.
func resumeSearch(dir string, out *outdir.Dir, fresh *recfile.Sweep, old []recfile.SweepStep) error {
	keep := slices.IndexFunc(old, func(st recfile.SweepStep) bool {
		return st.Status != recfile.SweepDone || !complete(stepPath(dir, &st))
	})
	if keep < 0 {
		keep = len(old)
	}
	for _, st := range old[keep:] {
		if err := out.RemoveAll(st.Dir); err != nil {
			return err
		}
	}
	if keep > 0 {
		fresh.Steps = old[:keep]
	}
	return nil
}

// optionsDiff names the options that differ ("" when none does).
func optionsDiff(a, b recfile.SweepOptions) string {
	var ma, mb map[string]any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	_ = json.Unmarshal(ja, &ma)
	_ = json.Unmarshal(jb, &mb)
	var diff []string
	for k, va := range ma {
		if vb := mb[k]; fmt.Sprint(va) != fmt.Sprint(vb) {
			diff = append(diff, fmt.Sprintf("%s was %v, now %v", k, va, vb))
		}
	}
	for k, vb := range mb {
		if _, ok := ma[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s was unset, now %v", k, vb))
		}
	}
	slices.Sort(diff)
	return strings.Join(diff, "; ")
}

// complete says whether a step directory's recording and load run both
// finished: meta.json and load.json exist and parse.
func complete(dir string) bool {
	var m recfile.Meta
	var l recfile.LoadSummary
	return recfile.ReadJSON(dir, recfile.MetaFile, &m) == nil && recfile.ReadJSON(dir, recfile.LoadJSONFile, &l) == nil
}

func host() recfile.Host {
	name, _ := os.Hostname()
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return recfile.Host{Hostname: name, Kernel: strings.TrimSpace(string(rel)), Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
}
