package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/collect"
	"github.com/brokertrace/brokertrace/privs"
	"github.com/brokertrace/brokertrace/probes"
	"github.com/brokertrace/brokertrace/process"
)

type runOptions struct {
	cpus  string
	grace time.Duration
}

func newRunCmd() *cobra.Command {
	var f recordFlags
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [--cpus LIST] [flags] -- CMD [ARGS...]",
		Short: "Start a broker in a cgroup of its own and record it",
		Long: `run starts CMD in a fresh cgroup, so that the cgroup's CPU accounting counts
the broker and nothing else (the "cpu controller" measurement of ICPE'14),
optionally pinned to the CPUs in --cpus, and records it exactly as record
does (same flags, same files).

The cgroup is brokertrace/run-PID-RANDOM: on hosts with cgroup v1 controllers
(legacy and hybrid) in the cpu and cpuacct hierarchies, and with --cpus in
cpuset (cpuset.mems copied from the parent); on unified (cgroup2-only) hosts
one cgroup with the cpu and, with --cpus, cpuset controllers. CMD is in the
cgroup before its first instruction runs.

CMD's standard output and error go to brokertrace's standard error; its
standard input is /dev/null. The recording ends after --duration, on Ctrl-C
or SIGTERM, or when CMD exits. brokertrace then stops CMD (SIGTERM to its
process group, SIGKILL to everything left in the cgroup after --grace, or at
once on a second Ctrl-C) and removes the cgroup, also when the recording
failed.

Exit status: 0 when the recording completed (and CMD, if it exited by
itself, exited with status 0); 1 when the recording failed, CMD exited by
itself with an error, or the cgroup could not be removed; 2 for bad flags,
a CMD that cannot be found or a CPU list the kernel refuses; 3 when CMD
could not be started; 4 without root, or on a kernel or host lacking
eBPF features or cgroups.`,
		Example: `  # NATS in its own cgroup, pinned to CPU 1, until Ctrl-C
  sudo brokertrace run --cpus 1 --out nats-run -- nats-server -a 127.0.0.1 -p 4222

  # ActiveMQ for 60 seconds, stopped afterwards with 20 s to shut down
  sudo brokertrace run --duration 60s --grace 20s --out amq-run -- /opt/activemq/bin/activemq console

  # Without CPU accounting (the cgroup still pins the CPUs)
  sudo brokertrace run --cpus 0-1 --cpu=false -- nats-server

  # Prometheus metrics on port 9464 while it runs
  sudo brokertrace run --metrics :9464 -- nats-server -p 4222

  # The tables as Parquet files (report reads them as it reads CSV)
  sudo brokertrace run --format parquet --out nats-pq -- nats-server -p 4222`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(cmd, f, o, args)
		},
	}
	fl := cmd.Flags()
	// Everything after CMD is CMD's, with or without "--".
	fl.SetInterspersed(false)
	fl.StringVar(&o.cpus, "cpus", "", "run CMD only on these CPUs (cpuset list: 1 or 0-3,6)")
	fl.DurationVar(&o.grace, "grace", 5*time.Second, "time CMD has to exit after SIGTERM before everything in its cgroup is killed")
	addRecordFlags(cmd, &f)
	return cmd
}

func runRun(cmd *cobra.Command, f recordFlags, o runOptions, args []string) error {
	if err := checkRun(cmd, f, o, args); err != nil {
		return err
	}
	child := exec.Command(args[0], args[1:]...)
	stderr := cmd.ErrOrStderr()
	ctx, hurry, stop := catchSignals()
	defer stop()

	// Pdeathsig (CMD is killed if brokertrace dies without cleaning up)
	// fires when the thread that forked CMD exits: keep it for the run.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	g, err := startInGroup(child, o.cpus, stderr)
	if err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		child.Wait()
		close(exited)
	}()

	var recErr error
	proc, err := process.ByPID(child.Process.Pid)
	if err != nil {
		<-exited
		recErr = withCode(exitNoTarget, fmt.Errorf("run: %s exited at once (%s)", args[0], child.ProcessState))
	} else {
		fmt.Fprintf(stderr, "brokertrace: started %s in cgroup %s %s\n", proc, g.Version, g.Path)
		f.needs = append(f.needs, stopNeed)
		recErr = recordWith(ctx, cmd, f, proc, "run", strings.Join(args, " "))
	}

	// The recording also ends when CMD exits, a moment before Wait has
	// reaped it: ask the kernel whether it has exited before stopping it.
	byItself := exitedAlready(child.Process.Pid, exited)
	if byItself {
		<-exited
	} else {
		stopChild(child, exited, g, o.grace, hurry, stderr)
	}
	var state *os.ProcessState
	select {
	case <-exited: // Wait has set ProcessState
		state = child.ProcessState
	default:
	}
	if state != nil && proc != nil {
		how := "stopped"
		if byItself {
			how = "exited by itself"
		}
		fmt.Fprintf(stderr, "brokertrace: %s %s: %s\n", how, proc, state)
	}
	if err := g.Delete(); err != nil {
		err = fmt.Errorf("run: %v (remove it with rmdir once its processes are gone)", err)
		if recErr != nil {
			fmt.Fprintf(stderr, "brokertrace: %v\n", err)
			return recErr
		}
		return withCode(exitFailure, err)
	}
	if recErr != nil {
		return recErr
	}
	if byItself && proc != nil && !state.Success() {
		return withCode(exitFailure, fmt.Errorf("run: %s exited by itself during the recording: %s", args[0], state))
	}
	return nil
}

// stopNeed: once the recording ends, run stops the broker, which may run
// as another user by then (mosquitto, started as root, switches to its
// own): SIGTERM to its process group, SIGKILL to what is left in its
// cgroup, one process at a time on cgroup v1.
var stopNeed = privs.Need{
	Caps: []privs.Cap{privs.CAP_KILL},
	Why:  "run: stopping the broker it started once the recording ends (SIGTERM to its process group, SIGKILL to what is left of its cgroup), which may run as another user by then",
}

// checkRun checks run's flags and arguments, the privileges and the
// kernel before anything starts.
func checkRun(cmd *cobra.Command, f recordFlags, o runOptions, args []string) error {
	if len(args) == 0 {
		return withCode(exitUsage, errors.New("run: give the broker's command after --, e.g. brokertrace run -- nats-server -p 4222"))
	}
	if err := checkRecordFlags(f); err != nil {
		return err
	}
	if o.grace < 0 {
		return withCode(exitUsage, errors.New("run: --grace must not be negative"))
	}
	// Checked before anything starts; the CPU source checks it again.
	if on, _ := cmd.Flags().GetBool("cpu"); on && cmdInt(cmd, "cpu-every") < 1 {
		return withCode(exitUsage, errors.New("run: --cpu-every must be at least 1"))
	}
	if err := probes.CheckPrivileges(); err != nil {
		return withCode(exitNoPriv, err)
	}
	if _, err := probes.KernelBTF(); err != nil {
		return withCode(exitNoPriv, err)
	}
	// exec.Command looks up only names without a slash; a path is checked
	// here too, so that a typo is a usage error before anything starts.
	if _, err := exec.LookPath(args[0]); err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) {
			err = ee.Err
		}
		return withCode(exitUsage, fmt.Errorf("run: cannot run %s: %v", args[0], err))
	}
	return nil
}

// catchSignals makes the first Ctrl-C or SIGTERM end the recording (ctx is
// cancelled) and a second one skip the grace period (hurry is closed).
// Neither leaves the cgroup behind. stop undoes it.
func catchSignals() (ctx context.Context, hurry <-chan struct{}, stop func()) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	hurryC := make(chan struct{})
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			close(hurryC)
		case <-done:
		}
	}()
	return ctx, hurryC, func() {
		close(done)
		cancel()
		signal.Stop(sigs)
	}
}

// startInGroup creates the cgroup, on the CPUs in cpus, and starts child in
// it with its output on stderr; when child cannot start, the cgroup is
// removed again.
func startInGroup(child *exec.Cmd, cpus string, stderr io.Writer) (*collect.Group, error) {
	g, err := collect.NewGroup(collect.GroupOptions{CPUs: cpus})
	switch {
	case errors.Is(err, collect.ErrBadCPUs):
		return nil, withCode(exitUsage, fmt.Errorf("run: --cpus: %w", err))
	case errors.Is(err, collect.ErrNoCgroup):
		return nil, withCode(exitNoPriv, fmt.Errorf("run: %w", err))
	case err != nil:
		return nil, withCode(exitFailure, fmt.Errorf("run: %w", err))
	}
	child.Stdout, child.Stderr = stderr, stderr
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := g.Start(child); err != nil {
		if derr := g.Delete(); derr != nil {
			fmt.Fprintf(stderr, "brokertrace: %v\n", derr)
		}
		return nil, withCode(exitNoTarget, fmt.Errorf("run: cannot start %s: %w", child.Args[0], err))
	}
	return g, nil
}

// exitedAlready says whether our child pid has exited, reaped or not,
// without reaping it.
func exitedAlready(pid int, exited <-chan struct{}) bool {
	select {
	case <-exited:
		return true
	default:
	}
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil {
		return errors.Is(err, unix.ECHILD) // reaped by Wait in the meantime
	}
	return info.Signo != 0 // SIGCHLD: a zombie; 0: still running
}

// stopChild asks CMD's process group to terminate, and after grace (or a
// second signal) kills everything in the cgroup.
func stopChild(child *exec.Cmd, exited <-chan struct{}, g *collect.Group, grace time.Duration, hurry <-chan struct{}, stderr io.Writer) {
	pid := child.Process.Pid
	syscall.Kill(-pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
		return
	case <-t.C:
		fmt.Fprintf(stderr, "brokertrace: pid %d did not exit within %v of SIGTERM; killing its cgroup\n", pid, grace)
	case <-hurry:
	}
	if err := g.Kill(); err != nil {
		fmt.Fprintf(stderr, "brokertrace: %v\n", err)
	}
	syscall.Kill(-pid, syscall.SIGKILL) // its process group, in the cgroup or not
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		fmt.Fprintf(stderr, "brokertrace: pid %d is still there after SIGKILL\n", pid)
	}
}

func cmdInt(cmd *cobra.Command, name string) int {
	v, _ := cmd.Flags().GetInt(name)
	return v
}
