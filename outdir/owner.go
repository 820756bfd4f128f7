package outdir

import (
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Owner is a user and group files are created as.
type Owner struct{ UID, GID int }

// Invoker is the user who ran brokertrace through sudo (SUDO_UID and
// SUDO_GID), when brokertrace runs as root and that is not root.
func Invoker() (Owner, bool) { return invoker() }

var invoker = sync.OnceValues(func() (Owner, bool) {
	if os.Geteuid() != 0 {
		return Owner{}, false
	}
	uid, err1 := strconv.Atoi(os.Getenv("SUDO_UID"))
	gid, err2 := strconv.Atoi(os.Getenv("SUDO_GID"))
	if err1 != nil || err2 != nil || uid <= 0 || gid < 0 {
		return Owner{}, false
	}
	return Owner{UID: uid, GID: gid}, true
})

// thread runs the file system calls of a Dir as its owner: an OS thread
// of its own whose fsuid, fsgid and supplementary groups are the owner's.
// Credentials are per thread in Linux; the goroutine keeps the thread
// locked and never returns, and Go starts new threads from a clean
// template thread rather than from a locked one, so no other goroutine
// ever runs with them.
type thread struct {
	ops   chan func()
	owner Owner
}

// invokerThread is the thread of the invoking user, nil (this process's
// own credentials) when there is none.
var invokerThread = sync.OnceValues(func() (*thread, error) {
	inv, ok := Invoker()
	if !ok {
		return nil, nil
	}
	return newThread(inv)
})

func newThread(o Owner) (*thread, error) {
	t := &thread{ops: make(chan func()), owner: o}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // for good: the thread ends with the goroutine
		err := become(o)
		ready <- err
		if err != nil {
			return
		}
		for op := range t.ops {
			op()
		}
	}()
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("act as uid %d gid %d for the outputs: %w", o.UID, o.GID, err)
	}
	return t, nil
}

// become sets this thread's file system credentials to o's: its groups,
// then fsgid and fsuid (dropping the file capabilities root had on it).
func become(o Owner) error {
	gids := []uint32{uint32(o.GID)}
	if u, err := user.LookupId(strconv.Itoa(o.UID)); err == nil {
		if ids, err := u.GroupIds(); err == nil {
			for _, id := range ids {
				if g, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(g) != gids[0] {
					gids = append(gids, uint32(g))
				}
			}
		}
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(gids)), uintptr(unsafe.Pointer(&gids[0])), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(o.GID), 0, 0)
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(o.UID), 0, 0)
	// Each returns the previous value; -1 changes nothing and reads it.
	gid, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, uintptr(^uint32(0)), 0, 0)
	uid, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, uintptr(^uint32(0)), 0, 0)
	if int(uid) != o.UID || int(gid) != o.GID {
		return fmt.Errorf("fsuid %d fsgid %d after setting them", uid, gid)
	}
	return nil
}

// do runs op on the thread, or here when there is none.
func (t *thread) do(op func() error) error {
	if t == nil {
		return op()
	}
	done := make(chan error, 1)
	t.ops <- func() { done <- op() }
	return <-done
}
