package collect

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Starting a command inside a Group: straight into the cgroup on cgroup2,
// through a shim that joins it before exec on v1.

// shimArg0 is argv[0] of the shim process that joins the cgroup before it
// runs the command (see Start).
const shimArg0 = "brokertrace-cgroup-shim"

// RunShim must be called early in main (or an init) of every program that
// starts commands with Group.Start. When the program was started as Start's
// shim it waits for the go-ahead and execs the command, never returning;
// otherwise it returns at once.
func RunShim() {
	if len(os.Args) < 3 || os.Args[0] != shimArg0 {
		return
	}
	// fd 3: the go-ahead, one byte once the shim is in the cgroup.
	// fd 4: exec's error, if any; it closes on a successful exec.
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	var b [1]byte
	for {
		n, err := syscall.Read(3, b[:])
		if err == syscall.EINTR {
			continue
		}
		if n != 1 {
			os.Exit(125) // the parent gave up
		}
		break
	}
	err := syscall.Exec(os.Args[1], os.Args[2:], os.Environ())
	fmt.Fprintf(os.NewFile(4, "exec-status"), "exec %s: %v", os.Args[1], err)
	os.Exit(127)
}

// Start starts cmd (from exec.Command) inside the group and returns once the
// process runs cmd's program: no instruction of it runs outside the group.
// On cgroup2 the kernel forks it straight into the group (clone3 with
// CLONE_INTO_CGROUP). On v1, which has no such fork, it starts a shim — this
// program again, see RunShim — moves the shim into the group while it
// waits, then lets it exec the program. cmd must not have ExtraFiles. On
// error the process, if any was started, has been reaped.
func (g *Group) Start(cmd *exec.Cmd) error {
	if cmd.Err != nil {
		return cmd.Err
	}
	if len(cmd.ExtraFiles) > 0 {
		return errors.New("collect: Group.Start cannot pass ExtraFiles")
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if g.v2 != nil {
		fd, err := unix.Open(g.Dirs[0], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open cgroup %s: %w", g.Path, err)
		}
		defer unix.Close(fd)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
		if err := cmd.Start(); err != nil {
			return err
		}
	} else if err := g.startShim(cmd); err != nil {
		return err
	}
	waitComm(cmd.Process.Pid, cmd.Path)
	return nil
}

func (g *Group) startShim(cmd *exec.Cmd) error {
	goR, goW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer goW.Close()
	resR, resW, err := os.Pipe()
	if err != nil {
		goR.Close()
		return err
	}
	defer resR.Close()
	path, args := cmd.Path, cmd.Args
	cmd.Path = "/proc/self/exe"
	cmd.Args = append([]string{shimArg0, path}, args...)
	cmd.ExtraFiles = []*os.File{goR, resW}
	err = cmd.Start()
	cmd.Path, cmd.Args, cmd.ExtraFiles = path, args, nil
	goR.Close()
	resW.Close()
	if err != nil {
		return err
	}
	if err := g.v1.AddProc(uint64(cmd.Process.Pid)); err != nil {
		goW.Close() // the shim exits without running the program
		cmd.Wait()
		return fmt.Errorf("move pid %d into cgroup %s: %w", cmd.Process.Pid, g.Path, err)
	}
	if _, err := goW.Write([]byte{1}); err != nil {
		cmd.Wait()
		return fmt.Errorf("start %s: the shim exited before exec: %w", path, err)
	}
	goW.Close()
	msg, _ := io.ReadAll(resR)
	if len(msg) > 0 {
		cmd.Wait()
		return errors.New(string(msg))
	}
	return nil
}

// waitComm waits, up to a second, until pid's comm is that of the program
// at path: the kernel closes close-on-exec descriptors (which is how Start
// learns that exec succeeded) a moment before it renames the task.
func waitComm(pid int, path string) {
	want := filepath.Base(path)
	if len(want) > 15 {
		want = want[:15]
	}
	file := fmt.Sprintf("/proc/%d/comm", pid)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(file)
		if err != nil || strings.TrimSpace(string(b)) == want {
			return
		}
	}
}
