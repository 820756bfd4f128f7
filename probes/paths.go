package probes

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
)

// Every loader (probes/NAME) has the same shape: NAME.go holds Options,
// Open, the reads, Stats and Close; gen.go the bpf2go line that turns
// bpf/NAME.bpf.c into the committed NAME_{x86,arm64}_bpfel.{go,o}. Its Options use
// the same field names for the same things:
//
//	PID       the target process (tgid)
//	Ports     TCP ports to watch
//	NetNS     network namespace inode; 0 for every namespace
//	Path      the hook path, "" (auto) by default; tests force one
//	RingSize  ring buffer bytes, a power of two ≥ page size; 0 for the default
//
// and its Stats the same names for the same counters in meta.json: events
// (records written to the ring buffer), dropped (records lost because it
// was full), map_full (updates lost because a map was full), missed
// (program runs the kernel skipped, see RecursionMisses).

// TracepointPath names the hook type of a probe whose programs attach to
// tracepoints: typed tp_btf where the kernel allows it, raw_tp otherwise.
type TracepointPath string

const (
	// PathAuto tries PathBTF and falls back to PathRaw.
	PathAuto TracepointPath = ""
	// PathBTF: tp_btf programs with typed arguments and direct loads.
	PathBTF TracepointPath = "tp_btf"
	// PathRaw: raw_tp programs reading through bpf_probe_read_kernel, for
	// kernels that refuse tp_btf.
	PathRaw TracepointPath = "raw_tp"
)

// Open opens a probe on the path asked for, or, when asked is "" (auto), on
// the first of paths that loads and attaches: a path of typed tp_btf
// programs or a newer kernel's tracepoints before its fallback. It runs
// Prepare first. When a later path was used, the Common's Fallback is the
// first path's error, so that meta data can say why; when none works, err
// says why each failed.
func Open[P ~string](name string, asked P, paths []P, open func(P) (*Probe, error)) (Common, error) {
	if asked != "" {
		if !slices.Contains(paths, asked) {
			return Common{}, fmt.Errorf("%s: unknown probe path %q (want %s)", name, asked, orList(paths))
		}
		paths = []P{asked}
	}
	if err := Prepare(); err != nil {
		return Common{}, err
	}
	var err error
	for i, path := range paths {
		p, perr := open(path)
		if perr == nil {
			c := Common{Probe: p, Asked: asked != ""}
			if i > 0 {
				c.Fallback = err.Error()
			}
			return c, nil
		}
		if err == nil {
			err = perr
		} else {
			err = fmt.Errorf("%w; %s fallback: %v", err, path, perr)
		}
	}
	return Common{}, err
}

// orList quotes paths for an error: `"tp_btf" or "raw_tp"`.
func orList[P ~string](paths []P) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = fmt.Sprintf("%q", p)
	}
	return strings.Join(q, " or ")
}

// SetVars sets global variables of spec (the const volatile settings of a
// BPF object) before it is loaded.
func SetVars(spec *ebpf.CollectionSpec, vars map[string]any) error {
	for name, v := range vars {
		vs, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("no variable %s in the BPF object", name)
		}
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("setting %s: %w", name, err)
		}
	}
	return nil
}

// SizeRing gives spec's ring buffer map ring size bytes (0 keeps the
// object's default) and sets the object's wakeup_bytes to an eighth of it:
// the programs wake the reader only each time that much more is waiting
// (ring_wake in bpf/include/brokertrace.h), since a wake-up per record
// costs the traced task about a microsecond (an irq_work, a self-IPI), and
// the reader polls every RingPoll otherwise.
func SizeRing(spec *ebpf.CollectionSpec, ring string, size int) error {
	if size != 0 {
		if size < os.Getpagesize() || size&(size-1) != 0 {
			return fmt.Errorf("ring size %d is not a power of two of at least %d bytes", size, os.Getpagesize())
		}
		spec.Maps[ring].MaxEntries = uint32(size)
	}
	return SetVars(spec, map[string]any{"wakeup_bytes": uint64(spec.Maps[ring].MaxEntries / 8)})
}
