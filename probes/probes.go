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
	"github.com/cilium/ebpf/link"
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

// Attach links a tracepoint program: through BTF (tp_btf, the program's
// attach target is in its section name) when btf is set, else as a raw
// tracepoint by name.
func Attach(p *ebpf.Program, btf bool, tracepoint string) (link.Link, error) {
	if btf {
		return link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
	}
	return link.AttachRawTracepoint(link.RawTracepointOptions{Name: tracepoint, Program: p})
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

// Hook is one tracepoint and the names of its program on each path: tp_btf
// (BTF) and the raw_tp fallback (Raw).
type Hook struct {
	Tracepoint string
	BTF, Raw   string
}

// KeepPath deletes from spec every program that is not the chosen path's
// program of one of hooks: the other path's programs may not verify on
// this kernel, and nothing else is to be loaded.
func KeepPath(spec *ebpf.CollectionSpec, hooks []Hook, btf bool) {
	keep := map[string]bool{}
	for _, h := range hooks {
		keep[h.name(btf)] = true
	}
	for name := range spec.Programs {
		if !keep[name] {
			delete(spec.Programs, name)
		}
	}
}

func (h Hook) name(btf bool) string {
	if btf {
		return h.BTF
	}
	return h.Raw
}

// AttachHooks attaches the chosen path's program of every hook from coll.
// It returns the programs and links in hook order; on an error the links
// made so far are closed.
func AttachHooks(coll *ebpf.Collection, hooks []Hook, btf bool) ([]*ebpf.Program, []link.Link, error) {
	var progs []*ebpf.Program
	var links []link.Link
	for _, h := range hooks {
		p := coll.Programs[h.name(btf)]
		l, err := Attach(p, btf, h.Tracepoint)
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			path := "raw_tp"
			if btf {
				path = "tp_btf"
			}
			return nil, nil, fmt.Errorf("%w: attaching %s to %s: %v", ErrKernel, path, h.Tracepoint, err)
		}
		progs = append(progs, p)
		links = append(links, l)
	}
	return progs, links, nil
}

// TryPaths opens a probe on its tp_btf path and, when that fails, on its
// raw_tp fallback. fallback is the tp_btf error when the fallback ran, so
// that meta data can say why.
func TryPaths[T any](open func(btf bool) (T, error)) (t T, fallback string, err error) {
	t, err = open(true)
	if err == nil {
		return t, "", nil
	}
	t, rawErr := open(false)
	if rawErr != nil {
		return t, "", fmt.Errorf("%w; raw_tp fallback: %v", err, rawErr)
	}
	return t, err.Error(), nil
}
