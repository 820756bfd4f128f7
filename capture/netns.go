package capture

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetNS runs fn on an OS thread that has joined the network namespace at
// path ("" runs fn right here, in the caller's namespace). Sockets are bound to
// the namespace of the thread that creates them and stay there, so fn can open
// AF_PACKET sockets (and list interfaces over netlink) in the broker's
// namespace while the rest of the process, including the sockets' readers,
// stays where it is. The thread is restored afterwards; if restoring fails
// the thread is left locked so the Go runtime discards it when the goroutine
// ends instead of reusing a thread in the wrong namespace.
func inNetNS(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("capture: cannot open network namespace %s: %v (give a readable path like /proc/PID/ns/net or /run/netns/NAME)", path, err)
	}
	defer unix.Close(target)

	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("capture: cannot open this thread's network namespace: %v", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			if errors.Is(err, unix.EINVAL) {
				errc <- fmt.Errorf("capture: %s is not a network namespace (give a path like /proc/PID/ns/net or /run/netns/NAME)", path)
				return
			}
			errc <- fmt.Errorf("capture: cannot enter network namespace %s: %v (need root or CAP_SYS_ADMIN)", path, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread exits with this goroutine.
			errc <- fmt.Errorf("capture: cannot return from network namespace %s: %v", path, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
