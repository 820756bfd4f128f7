// Package probes holds what every eBPF probe of brokertrace needs before it
// loads: privilege and kernel-feature checks that turn the kernel's terse
// errors into one line saying what is wrong and what to do.
package probes

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// ErrPrivilege is wrapped by errors that mean: run as root, or grant the
// capabilities named.
var ErrPrivilege = errors.New("insufficient privileges")

// ErrKernel is wrapped by errors that mean: this kernel lacks a feature.
var ErrKernel = errors.New("kernel lacks a required feature")

const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

func hasCap(eff uint64, c uint) bool { return eff&(1<<c) != 0 }

// CheckPrivileges reports whether the process may load and attach tracing
// programs: CAP_SYS_ADMIN, or CAP_BPF together with CAP_PERFMON.
func CheckPrivileges() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	eff := uint64(data[0].Effective) | uint64(data[1].Effective)<<32
	if hasCap(eff, capSysAdmin) || (hasCap(eff, capBPF) && hasCap(eff, capPerfmon)) {
		return nil
	}
	return fmt.Errorf("%w: loading eBPF probes needs root (or CAP_BPF and CAP_PERFMON): run with sudo", ErrPrivilege)
}

// vmlinuxBTF is where the kernel exposes its BTF.
const vmlinuxBTF = "/sys/kernel/btf/vmlinux"

var (
	kernelSpecOnce sync.Once
	kernelSpec     *btf.Spec
	kernelSpecErr  error
)

// KernelBTF returns the running kernel's BTF, which CO-RE relocation and
// tp_btf programs need, or an error that says how to get it.
func KernelBTF() (*btf.Spec, error) {
	kernelSpecOnce.Do(func() {
		if kernelSpecErr = checkBTF(vmlinuxBTF); kernelSpecErr != nil {
			return
		}
		kernelSpec, kernelSpecErr = btf.LoadKernelSpec()
		if kernelSpecErr != nil {
			kernelSpecErr = fmt.Errorf("%w: reading kernel BTF: %v", ErrKernel, kernelSpecErr)
		}
	})
	return kernelSpec, kernelSpecErr
}

func checkBTF(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%w: no BTF at %s: brokertrace needs a kernel built with CONFIG_DEBUG_INFO_BTF=y (Linux 5.8 or later; most distribution kernels since 2021 have it)", ErrKernel, path)
	}
	return nil
}

// HasTracepoint reports whether the kernel's BTF knows the tracepoint, i.e.
// whether a tp_btf program can attach to it.
func HasTracepoint(name string) bool {
	spec, err := KernelBTF()
	if err != nil {
		return false
	}
	var td *btf.Typedef
	return spec.TypeByName("btf_trace_"+name, &td) == nil
}

// TracepointArgs is how many arguments the kernel passes the tracepoint's
// programs, from its BTF (btf_trace_NAME points to a function whose first
// parameter is the tracepoint's data, the others its arguments): kernels
// add arguments to tracepoints (sched_switch's prev_state in 5.18), and a
// program that reads one the kernel does not pass is refused.
func TracepointArgs(name string) (int, error) {
	spec, err := KernelBTF()
	if err != nil {
		return 0, err
	}
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_"+name, &td); err != nil {
		return 0, fmt.Errorf("%w: no tracepoint %s in the kernel's BTF: %v", ErrKernel, name, err)
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return 0, fmt.Errorf("btf_trace_%s is not a function pointer", name)
	}
	fn, ok := ptr.Target.(*btf.FuncProto)
	if !ok || len(fn.Params) == 0 {
		return 0, fmt.Errorf("btf_trace_%s is not a function pointer", name)
	}
	return len(fn.Params) - 1, nil
}

// Prepare runs the checks every probe needs and lifts the memlock limit that
// kernels before 5.11 charge BPF maps against.
func Prepare() error {
	if err := CheckPrivileges(); err != nil {
		return err
	}
	if _, err := KernelBTF(); err != nil {
		return err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return fmt.Errorf("%w: raising RLIMIT_MEMLOCK: %v", ErrPrivilege, err)
	}
	return nil
}

// RecursionMisses sums the runs the kernel skipped because a program would
// have nested in itself on a CPU: data a probe never saw, to be reported.
func RecursionMisses(progs []*ebpf.Program) uint64 {
	var n uint64
	for _, p := range progs {
		if ps, err := p.Stats(); err == nil {
			n += ps.RecursionMisses
		}
	}
	return n
}
