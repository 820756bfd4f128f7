package process

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

var errESRCH error = unix.ESRCH

// pollInterval is how often the fallback of WaitExit re-reads /proc.
const pollInterval = 100 * time.Millisecond

// WaitExit blocks until the process has exited and returns nil, or returns
// ctx.Err() if ctx ends first. "Exited" means the process terminated, whether
// or not its parent has reaped it yet; a pid that already names another
// process counts as exited.
//
// It uses pidfd_open(2) and poll(2), which (unlike wait(2)) work for
// processes that are not our children and wake up the moment the process
// exits. If pidfd_open is unavailable — ENOSYS on kernels before 5.3, or
// EPERM from a seccomp filter — it falls back to checking /proc every 100 ms
// (see Alive), so exit is then noticed up to 100 ms late.
func (p *Process) WaitExit(ctx context.Context) error {
	pidfd, err := unix.PidfdOpen(p.PID, unix.PIDFD_NONBLOCK)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil // already gone
		}
		return p.waitPoll(ctx)
	}
	defer unix.Close(pidfd)
	// The pid could have been reused before pidfd_open: the pidfd must
	// refer to our process, so check its identity after opening.
	if !p.Alive() {
		return nil
	}
	return waitPidfd(ctx, pidfd)
}

// waitPidfd polls the pidfd (readable once the process exits) together with
// an eventfd that a helper goroutine signals when ctx ends, so cancellation
// is as prompt as exit.
func waitPidfd(ctx context.Context, pidfd int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cancel, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			var one = [8]byte{1}
			unix.Write(cancel, one[:])
		case <-done:
		}
	}()
	// The goroutine must be finished before cancel is closed, or its
	// write could hit a reused descriptor.
	defer func() {
		close(done)
		wg.Wait()
		unix.Close(cancel)
	}()

	fds := []unix.PollFd{
		{Fd: int32(pidfd), Events: unix.POLLIN},
		{Fd: int32(cancel), Events: unix.POLLIN},
	}
	for {
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll pidfd: %w", err)
		}
		if fds[0].Revents != 0 {
			return nil
		}
		if fds[1].Revents != 0 {
			return ctx.Err()
		}
	}
}

// waitPoll is the /proc-polling fallback of WaitExit.
func (p *Process) waitPoll(ctx context.Context) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		if !p.Alive() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
