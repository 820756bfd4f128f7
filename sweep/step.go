package sweep

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// Timeouts of a step's children.
const (
	attachTimeout = 2 * time.Minute  // record loading its probes on a busy host
	stopTimeout   = 60 * time.Second // record writing its files after SIGINT
)

// attachedPrefix is the line record prints once every probe is live.
const attachedPrefix = "brokertrace: attached"

// measure runs one step's recording and load into its directory: record
// attached first, then the load (pinned to LoadCPUs), then record stopped
// as by Ctrl-C so that it writes complete files.
func (s *sweeper) measure(ctx context.Context, st *recfile.SweepStep, runPID int) error {
	stepDir, err := s.stepDir(st)
	if err != nil {
		return err
	}
	defer stepDir.Close()
	dir := stepDir.Path()
	rec, err := s.startRecord(ctx, stepDir, runPID)
	if err != nil {
		return err
	}
	loadErr := s.runLoad(ctx, stepDir, st)
	var ld recfile.LoadSummary
	if loadErr != nil && ctx.Err() == nil && recfile.ReadJSON(dir, recfile.LoadJSONFile, &ld) == nil {
		// A load that ended with an error but wrote its files (a broker
		// that stopped acknowledging past saturation) is a measurement:
		// its losses are in load.json and the step's Missing.
		st.Warnings = append(st.Warnings, loadErr.Error())
		loadErr = nil
	}
	recErr := rec.stop()
	if loadErr != nil {
		return loadErr
	}
	return recErr
}

// stepDir is st's directory, emptied: a rerun's step starts afresh.
func (s *sweeper) stepDir(st *recfile.SweepStep) (*outdir.Dir, error) {
	if err := s.out.RemoveAll(st.Dir); err != nil {
		return nil, err
	}
	return s.out.Sub(st.Dir)
}

// child is a step's child process in a process group of its own, so that
// the sweep decides when it is interrupted: a terminal's Ctrl-C reaches
// the sweep, which passes it on.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *outdir.File
}

// startChild starts argv with its output in dir/logName.
func startChild(name string, argv []string, dir *outdir.Dir, logName string, stderr io.Writer) (*child, error) {
	log, err := dir.Stream(logName, outdir.FilePerm)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	// The file itself, not the wrapper: the child writes to it directly.
	cmd.Stdout = log.File
	cmd.Stderr = log.File
	if stderr != nil {
		cmd.Stderr = stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{}), log: log}
	go func() { _ = cmd.Wait(); close(c.done) }()
	return c, nil
}

// wait waits for the child, interrupting it (SIGINT, as Ctrl-C) when ctx
// ends, killing it when it outlives a further stopTimeout.
func (c *child) wait(ctx context.Context) error {
	select {
	case <-c.done:
	case <-ctx.Done():
		return c.interrupt()
	}
	return c.result()
}

func (c *child) interrupt() error {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
		c.log.Close()
		return fmt.Errorf("%s did not end within %v of SIGINT: killed (see %s)", c.name, stopTimeout, c.log.Name())
	}
	return c.result()
}

func (c *child) result() error {
	c.log.Close()
	if c.cmd.ProcessState.Success() {
		return nil
	}
	return fmt.Errorf("%s: %v: %s", c.name, c.cmd.ProcessState, tail(c.log.Name()))
}

// tail is the last lines of a log, for an error message.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-3):], " | ")
}

// recording is a step's running `brokertrace record`.
type recording struct{ *child }

// startRecord starts record on the broker and waits until it attached.
func (s *sweeper) startRecord(ctx context.Context, dir *outdir.Dir, runPID int) (*recording, error) {
	argv := append([]string{s.cfg.Exe, "record"}, s.cfg.recordTarget(runPID)...)
	argv = append(argv, "--out", dir.Path(), "--quiet")
	place, _ := s.cfg.recorderFlags()
	argv = append(append(argv, place...), s.cfg.Options.RecordFlags...)
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c, err := startChild("record", argv, dir, "record.log", pw)
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, err
	}
	attached := make(chan struct{})
	go copyWatch(pr, c.log, attached)
	select {
	case <-attached:
		return &recording{c}, nil
	case <-c.done:
		pr.Close()
		return nil, c.result()
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), c.interrupt())
	case <-time.After(attachTimeout):
		return nil, errors.Join(fmt.Errorf("record did not attach within %v", attachTimeout), c.interrupt())
	}
}

// copyWatch copies record's standard error into its log and closes
// attached at the attached line.
func copyWatch(r *os.File, log io.Writer, attached chan struct{}) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	seen := false
	for sc.Scan() {
		fmt.Fprintln(log, sc.Text())
		if !seen && strings.HasPrefix(sc.Text(), attachedPrefix) {
			seen = true
			close(attached)
		}
	}
}

// stop ends the recording as Ctrl-C does and waits for its files.
func (r *recording) stop() error { return r.interrupt() }

// runLoad runs the step's load: --step long, its first --warmup marked as
// warm-up, on a subject of its own so that a message an earlier step left
// queued in the broker is never taken for this step's.
func (s *sweeper) runLoad(ctx context.Context, dir *outdir.Dir, st *recfile.SweepStep) error {
	o := s.cfg.Options
	argv := []string{s.cfg.Exe, "load", "--url", o.URL, "--out", dir.Path(),
		"--rate", strconv.FormatFloat(st.RateAsked, 'f', -1, 64),
		"--duration", time.Duration(o.StepNs).String(), "--warmup", time.Duration(o.WarmupNs).String(),
		"--size", strconv.Itoa(o.Size), "--pattern", st.Pattern,
		"--subject", "brokertrace.sweep." + strconv.Itoa(st.Index), "--drain", s.cfg.drain().String()}
	if st.Pattern == PatternBursty {
		argv = append(argv, "--burst", strconv.Itoa(st.Burst))
	}
	if o.LoadCPUs != "" {
		argv = append([]string{"taskset", "-c", o.LoadCPUs}, argv...)
	}
	c, err := startChild("load", argv, dir, "load.log", nil)
	if err != nil {
		return err
	}
	if err := c.wait(ctx); err != nil {
		return err
	}
	return ctx.Err()
}

func (c *Config) drain() time.Duration {
	if c.Drain > 0 {
		return c.Drain
	}
	return 5 * time.Second
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			return true
		}
	}
	return false
}
