package privs

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// State is one thread's capability sets and no_new_privs.
type State struct {
	Effective, Permitted, Inheritable, Bounding, Ambient Set
	NoNewPrivs                                           bool
}

// Current reads the sets of the calling thread. After Drop every thread of
// the process has the same; before it, a thread locked by its goroutine
// may have changed its own.
func Current() (State, error) {
	var st State
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return st, fmt.Errorf("capget: %w", err)
	}
	st.Effective = Set(data[0].Effective) | Set(data[1].Effective)<<32
	st.Permitted = Set(data[0].Permitted) | Set(data[1].Permitted)<<32
	st.Inheritable = Set(data[0].Inheritable) | Set(data[1].Inheritable)<<32
	for c := Cap(0); c <= Last(); c++ {
		if on, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && on == 1 {
			st.Bounding |= SetOf(c)
		}
		if on, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0); err == nil && on == 1 {
			st.Ambient |= SetOf(c)
		}
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return st, fmt.Errorf("prctl(PR_GET_NO_NEW_PRIVS): %w", err)
	}
	st.NoNewPrivs = nnp == 1
	return st, nil
}

// Last is the highest capability this kernel knows: PR_CAPBSET_READ
// refuses any beyond it.
func Last() Cap {
	c := Cap(0)
	for c < 63 {
		if _, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c+1), 0, 0, 0); err != nil {
			break
		}
		c++
	}
	return c
}

// All is every capability this kernel knows.
func All() Set { return Set(1)<<(Last()+1) - 1 }

// ErrCgo is returned by Drop in a binary linked with cgo: the Go runtime
// cannot then reach every thread (threads cgo's C code started are not
// its own), and dropping on some threads only would be worse than not at
// all.
var ErrCgo = errors.New("cannot change the capabilities of every thread: the binary uses cgo (build it with CGO_ENABLED=0)")

// Drop leaves every thread of the process with exactly keep (those of it
// that are permitted now) as its effective and permitted sets, nothing
// inheritable or ambient, a bounding set of keep, and no_new_privs set: no
// thread can regain what was dropped, nor can any program it executes.
// Capabilities and no_new_privs are per thread in Linux, and Go runs many
// threads, so each step runs on all of them (syscall.AllThreadsSyscall).
// The bounding set is cut first, while CAP_SETPCAP is still effective.
// On an error the process may be left part way, the same on every thread.
func Drop(keep ...Cap) error {
	cur, err := Current()
	if err != nil {
		return err
	}
	k := SetOf(keep...) & cur.Permitted
	if err := allThreads("prctl(PR_SET_NO_NEW_PRIVS)", unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return err
	}
	if err := allThreads("prctl(PR_CAP_AMBIENT_CLEAR_ALL)", unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		return err
	}
	for _, c := range (cur.Bounding &^ k).Caps() {
		if err := allThreads("prctl(PR_CAPBSET_DROP, "+c.String()+")", unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); err != nil {
			return err
		}
	}
	return capsetAll(k, k, 0)
}

// capsetAll sets the three sets of every thread.
func capsetAll(eff, prm, inh Set) error {
	hdr := &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := &[2]unix.CapUserData{
		{Effective: uint32(eff), Permitted: uint32(prm), Inheritable: uint32(inh)},
		{Effective: uint32(eff >> 32), Permitted: uint32(prm >> 32), Inheritable: uint32(inh >> 32)},
	}
	// The conversions stay in the call, which keeps hdr and data alive
	// and in place (go:uintptrescapes).
	_, _, errno := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(hdr)), uintptr(unsafe.Pointer(data)), 0)
	return allThreadsErr("capset", errno)
}

// allThreads makes one system call on every thread of the Go runtime;
// its arguments are numbers, not pointers.
func allThreads(what string, trap, a1, a2, a3 uintptr) error {
	_, _, errno := syscall.AllThreadsSyscall(trap, a1, a2, a3)
	return allThreadsErr(what, errno)
}

func allThreadsErr(what string, errno syscall.Errno) error {
	switch errno {
	case 0:
		return nil
	case syscall.ENOTSUP:
		return ErrCgo
	}
	return fmt.Errorf("%s: %w", what, errno)
}

// WithEffective runs fn on an OS thread of its own whose effective set is
// cut to eff (of what is permitted), and restores that thread's set
// afterwards: what fn can do is what the process could do after Drop(eff),
// since the kernel checks capabilities, and the credentials /proc compares
// with a target's, against the effective set. It finds out, on this host
// and for this target, which capabilities an operation needs. It must not
// run at the same time as Drop, which requires every thread to be alike.
func WithEffective(eff Set, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		cur, err := Current()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		if err := capset(eff&cur.Permitted, cur.Permitted, cur.Inheritable); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		ferr := fn()
		if capset(cur.Effective, cur.Permitted, cur.Inheritable) == nil {
			// Left locked otherwise: the thread ends with the goroutine.
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

// capset sets the calling thread's sets.
func capset(eff, prm, inh Set) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: uint32(eff), Permitted: uint32(prm), Inheritable: uint32(inh)},
		{Effective: uint32(eff >> 32), Permitted: uint32(prm >> 32), Inheritable: uint32(inh >> 32)},
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
