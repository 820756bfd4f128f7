package process

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// NetNSPath is the path of pid's network namespace, which both names it to
// setns(2) and, by its inode, identifies it to the probes.
func NetNSPath(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/ns/net" }

// NetNSInode returns the inode number that identifies the network
// namespace at path (e.g. /proc/PID/ns/net): the kernel keeps the same
// number in struct net (ns.inum), so probes filter on it.
func NetNSInode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("cannot read network namespace %s: %w", path, err)
	}
	return st.Ino, nil
}

// InNetNS runs fn on an OS thread that has joined the network namespace at
// path ("" runs fn right here, in the caller's namespace). Sockets are
// bound to the namespace of the thread that creates them and stay there, so
// fn can open AF_PACKET sockets (and list interfaces over netlink) in the
// broker's namespace while the rest of the process, including the sockets'
// readers, stays where it is. The thread is restored afterwards; if
// restoring fails the thread is left locked so the Go runtime discards it
// when the goroutine ends instead of reusing a thread in the wrong
// namespace.
//
// The error is only about the namespace (fn did not run, or the thread
// could not return); fn hands its own results back through its closure.
func InNetNS(path string, fn func()) error {
	if path == "" {
		fn()
		return nil
	}
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("cannot open network namespace %s: %v (give a readable path like /proc/PID/ns/net or /run/netns/NAME)", path, err)
	}
	defer unix.Close(target)

	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("cannot open this thread's network namespace: %v", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			if errors.Is(err, unix.EINVAL) {
				errc <- fmt.Errorf("%s is not a network namespace (give a path like /proc/PID/ns/net or /run/netns/NAME)", path)
				return
			}
			errc <- fmt.Errorf("cannot enter network namespace %s: %v (need root or CAP_SYS_ADMIN)", path, err)
			return
		}
		fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread exits with this goroutine.
			errc <- fmt.Errorf("cannot return from network namespace %s: %v", path, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	return <-errc
}
