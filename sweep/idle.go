package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/brokertrace/brokertrace/recfile"
)

// PatternIdle is the idle step's pattern: no load at all.
const PatternIdle = "idle"

// idleSettle is how long the broker is left alone after the last step
// before the idle step records it: the step's drain has delivered its
// messages; this lets the broker's own work after them (acknowledgements,
// a queue's clean-up) end.
const idleSettle = time.Second

// idleEdge is left out at each end of the idle step's recording: the
// probes attaching and the recording stopping.
const idleEdge = int64(250 * time.Millisecond)

// idle runs the idle step (--idle) once the ladder is done: the broker
// recorded without load. What it spends then — timers, housekeeping — it
// spends at every rate: calibrate takes it as the model's background and
// out of the fit of the costs per message and per wake-up.
func (s *sweeper) idle(ctx context.Context) error {
	o := s.cfg.Options
	if o.IdleNs <= 0 || s.sw.Idle != nil && s.sw.Idle.Status == recfile.SweepDone {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w before the idle step", ErrInterrupted)
	}
	st := &recfile.SweepStep{Dir: "idle", Pattern: PatternIdle, Status: recfile.SweepPending}
	s.sw.Idle = st
	if s.prog.w != nil {
		fmt.Fprintf(s.prog.w, "idle step: the broker without load for %v\n", time.Duration(o.IdleNs))
	}
	start := time.Now()
	err := s.measureIdle(ctx, st)
	st.WallNs = time.Since(start).Nanoseconds()
	if err == nil {
		err = summarizeIdle(stepPath(s.cfg.Out, st), st)
	}
	st.Status = recfile.SweepDone
	if err != nil {
		st.Status, st.Error = recfile.SweepFailed, err.Error()
	}
	if s.prog.w != nil {
		fmt.Fprintf(s.prog.w, "idle step: broker %.4f CPU (%s), %.0f wake-ups/s; system %.3f CPUs (%s)%s\n",
			st.BrokerUtil, st.BrokerUtilSource, st.WakeupsPerSec, st.SystemUtil, st.SystemUtilSource, failedText(st))
	}
	werr := s.write()
	if ctx.Err() != nil {
		return fmt.Errorf("%w during the idle step; rerun the same command to resume", ErrInterrupted)
	}
	return werr
}

func failedText(st *recfile.SweepStep) string {
	if st.Status == recfile.SweepFailed {
		return ": FAILED: " + st.Error
	}
	if st.Lossy() {
		return fmt.Sprintf(": %d markers and %d events lost, LOSSY", st.MarkersLost, st.DroppedEvents)
	}
	return ""
}

// measureIdle records the broker for IdleNs, after idleSettle.
func (s *sweeper) measureIdle(ctx context.Context, st *recfile.SweepStep) error {
	select {
	case <-time.After(idleSettle):
	case <-ctx.Done():
		return ctx.Err()
	}
	stepDir, err := s.stepDir(st)
	if err != nil {
		return err
	}
	defer stepDir.Close()
	pid := 0
	if s.broker != nil {
		pid = s.broker.pid
	}
	rec, err := s.startRecord(ctx, stepDir, pid)
	if err != nil {
		return err
	}
	select {
	case <-time.After(time.Duration(s.cfg.Options.IdleNs)):
	case <-ctx.Done():
	}
	return rec.stop()
}

// summarizeIdle fills the idle step's figures from its files: the
// recording's span less idleEdge at each end.
func summarizeIdle(dir string, st *recfile.SweepStep) error {
	meta, ml, err := readMeta(dir)
	if err != nil {
		return err
	}
	st.WindowStartNs, st.WindowEndNs = meta.StartNs+idleEdge, meta.EndNs-idleEdge
	if st.WindowEndNs <= st.WindowStartNs {
		return fmt.Errorf("the idle recording lasted %v: too short for a window", time.Duration(meta.EndNs-meta.StartNs))
	}
	in := func(t int64) bool { return t >= st.WindowStartNs && t < st.WindowEndNs }
	losses(&ml, st)
	st.Warnings = append(st.Warnings, meta.Warnings...)
	if err := cpu(dir, st, in); err != nil {
		return err
	}
	return sched(dir, st, in)
}
