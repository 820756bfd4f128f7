package probes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sync/errgroup"

	"github.com/brokertrace/brokertrace/kernfs"
	"github.com/brokertrace/brokertrace/recfile"
)

// Hook is one program of a probe and the tracepoint it runs at.
type Hook struct {
	Prog       string // the program's name in the BPF object
	Tracepoint string // the tracepoint, without its category
	// BTF attaches the program as tp_btf (its attach target is in its
	// section name); otherwise as a raw tracepoint by name.
	BTF bool
	// Group, when set, attaches the program as a perf tracepoint of that
	// group ("syscalls" for sys_exit_recvmmsg): the per-system-call
	// tracepoints exist only in that form, and they run only for their one
	// system call, where raw_tp/sys_exit runs for every call.
	Group string
}

// String names the hook as meta.json lists it: "tp_btf/sock_recv_length",
// "tracepoint/syscalls/sys_exit_recvmmsg".
func (h Hook) String() string {
	switch {
	case h.Group != "":
		return "tracepoint/" + h.Group + "/" + h.Tracepoint
	case h.BTF:
		return "tp_btf/" + h.Tracepoint
	}
	return "raw_tp/" + h.Tracepoint
}

// attach links p to the hook. A perf tracepoint is found by its id in
// tracefs, which is mounted first if it is not (kernfs); note says so.
func (h Hook) attach(p *ebpf.Program) (l link.Link, note string, err error) {
	switch {
	case h.Group != "":
		m, err := kernfs.Ensure(kernfs.Tracefs)
		if err != nil {
			return nil, "", err
		}
		l, err := link.Tracepoint(h.Group, h.Tracepoint, p, nil)
		return l, m.Note, err
	case h.BTF:
		l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
		return l, "", err
	}
	l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: h.Tracepoint, Program: p})
	return l, "", err
}

// ErrClosed is returned by a loader's reads after Close: its maps are gone.
var ErrClosed = errors.New("tracer is closed")

// Probe is what every loader holds once its BPF object is in the kernel:
// the collection, the programs of the path it runs on and their links, and
// the ring buffer reader of a probe that streams records. Loaders differ in
// what they set before loading and what they read; this is the rest.
type Probe struct {
	name  string
	path  string
	hooks []Hook
	coll  *ebpf.Collection
	progs []*ebpf.Program
	ring  *ringbuf.Reader
	// ringName is the ring's map, listed in Rings while the probe is open.
	ringName string

	mu       sync.Mutex
	links    []link.Link
	notes    []string
	detached bool
	closed   bool
}

// Object says what Load creates: the probe's name (for errors), the path
// it runs on, the hooks of that path, and the ring buffer map to read, if
// any.
type Object struct {
	Name  string
	Path  string
	Hooks []Hook
	Ring  string
	// Share names maps of spec to be replaced by maps another probe
	// created (a map both programs read and one writes).
	Share map[string]*ebpf.Map
}

// Load creates spec's maps and the programs of o.Hooks in the kernel, and
// deletes every other program from spec first: another path's programs may
// not verify on this kernel, and nothing else is to be loaded. It does not
// attach (see Attach), so that a loader can fill its maps first.
func Load(spec *ebpf.CollectionSpec, o Object) (*Probe, error) {
	for name := range spec.Programs {
		if !slices.ContainsFunc(o.Hooks, func(h Hook) bool { return h.Prog == name }) {
			delete(spec.Programs, name)
		}
	}
	coll, err := newCollection(spec, o.Share)
	if err != nil {
		return nil, fmt.Errorf("%w: %s (%s path): %v", ErrKernel, o.Name, o.Path, VerifierSummary(err))
	}
	p := &Probe{name: o.Name, path: o.Path, hooks: o.Hooks, coll: coll, ringName: o.Ring}
	for _, h := range o.Hooks {
		p.progs = append(p.progs, coll.Programs[h.Prog])
	}
	if o.Ring != "" {
		if p.ring, err = ringbuf.NewReader(coll.Maps[o.Ring]); err != nil {
			coll.Close()
			return nil, fmt.Errorf("%s: ring buffer reader: %w", o.Name, err)
		}
		addRing(coll.Maps[o.Ring])
	}
	return p, nil
}

// newCollection creates spec's maps (share replacing those it names), then
// its programs side by side: the kernel verifies privileged loads in
// parallel, and the verifier is most of a probe's start — the socket
// probe's four programs with a frame parser took 1.1 s each, one after the
// other, on this project's 2-CPU host.
func newCollection(spec *ebpf.CollectionSpec, share map[string]*ebpf.Map) (*ebpf.Collection, error) {
	maps := spec.Copy()
	maps.Programs = nil
	coll, err := ebpf.NewCollectionWithOptions(maps, ebpf.CollectionOptions{MapReplacements: share})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var g errgroup.Group
	for name := range spec.Programs {
		g.Go(func() error {
			prog, err := newProgram(spec, name, coll.Maps)
			mu.Lock()
			defer mu.Unlock()
			if prog != nil {
				coll.Programs[name] = prog
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		coll.Close()
		return nil, err
	}
	return coll, nil
}

// newProgram loads spec's program name against maps already created.
func newProgram(spec *ebpf.CollectionSpec, name string, maps map[string]*ebpf.Map) (*ebpf.Program, error) {
	one := spec.Copy()
	one.Programs = map[string]*ebpf.ProgramSpec{name: one.Programs[name]}
	one.Variables = nil // the data sections are maps already filled
	c, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{MapReplacements: maps})
	if err != nil {
		return nil, err
	}
	for _, m := range c.Maps {
		m.Close() // clones of maps
	}
	return c.Programs[name], nil
}

// LoadAttached is Load and then Attach, for a probe with nothing to fill
// in between.
func LoadAttached(spec *ebpf.CollectionSpec, o Object) (*Probe, error) {
	p, err := Load(spec, o)
	if err != nil {
		return nil, err
	}
	if err := p.Attach(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Attach links every program to its hook, also again after Detach. On an
// error the links made so far are closed; the probe stays loaded.
func (p *Probe) Attach() error {
	var links []link.Link
	var notes []string
	for i, h := range p.hooks {
		l, note, err := h.attach(p.progs[i])
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			return fmt.Errorf("%w: %s: attaching %s: %v", ErrKernel, p.name, h, err)
		}
		links = append(links, l)
		if note != "" && !slices.Contains(notes, note) {
			notes = append(notes, note)
		}
	}
	p.mu.Lock()
	p.links, p.notes, p.detached = links, notes, false
	p.mu.Unlock()
	return nil
}

// Map is the loaded map of that name.
func (p *Probe) Map(name string) *ebpf.Map { return p.coll.Maps[name] }

// Programs are the loaded programs, in hook order.
func (p *Probe) Programs() []*ebpf.Program { return p.progs }

// Path is the path the probe runs on.
func (p *Probe) Path() string { return p.path }

// Hooks names the kernel hooks of the path, for meta data.
func (p *Probe) Hooks() []string {
	names := make([]string, len(p.hooks))
	for i, h := range p.hooks {
		names[i] = h.String()
	}
	return names
}

// Missed sums the runs the kernel skipped because a program would have
// nested in itself on a CPU: data the probe never saw, to be reported.
func (p *Probe) Missed() uint64 { return RecursionMisses(p.progs) }

// Locked runs fn with the probe locked against Close, or returns
// ErrClosed (prefixed with the probe's name) when it is closed already.
func (p *Probe) Locked(fn func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("%s: %w", p.name, ErrClosed)
	}
	return fn()
}

// Detach stops the probe: no program runs once it returns. Its maps stay
// readable and records already in its ring buffer are still delivered.
func (p *Probe) Detach() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.detach()
}

func (p *Probe) detach() error {
	if p.detached {
		return nil
	}
	p.detached = true
	var errs []error
	for _, l := range p.links {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// Close detaches the probe and frees its kernel objects.
func (p *Probe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	err := p.detach()
	if p.ring != nil {
		p.ring.Close()
	}
	if p.ring != nil {
		removeRing(p.coll.Maps[p.ringName])
	}
	p.coll.Close()
	return err
}

// ReadRing delivers the records of the probe's ring buffer as the package
// function ReadRing does.
func (p *Probe) ReadRing(ctx context.Context, h RingHandlers) error {
	if err := ReadRing(ctx, p.ring, p.coll.Maps[p.ringName], h); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

// Common is embedded in every loader's Tracer: the probe and the methods
// every loader has alike.
type Common struct {
	Probe *Probe
	// Fallback says why the first path was not used, when Open fell back.
	Fallback string
	// Asked: the path was asked for (Options.Path), not chosen.
	Asked bool
	// Why, when set, says why the loader chose a variant of the path's
	// programs for this kernel; PathReason adds it.
	Why string
}

// Path is the path the probe runs on, as meta.json names it.
func (c *Common) Path() string { return c.Probe.Path() }

// FallbackReason says why the preferred path was not used when Path is
// its fallback without having been asked for; empty otherwise.
func (c *Common) FallbackReason() string { return c.Fallback }

// PathReason says in words why the probe runs on its path: asked for,
// the first choice, or why the paths before it failed. Never empty: no
// fallback is silent.
func (c *Common) PathReason() string {
	r := recfile.FirstChoice
	switch {
	case c.Asked:
		r = "asked for"
	case c.Fallback != "":
		r = "fallback: " + c.Fallback
	}
	switch {
	case c.Why == "":
		return r
	case r == recfile.FirstChoice:
		return c.Why
	}
	return r + "; " + c.Why
}

// Notes say what was done to the host for the probe (a filesystem
// mounted).
func (c *Common) Notes() []string {
	c.Probe.mu.Lock()
	defer c.Probe.mu.Unlock()
	return slices.Clone(c.Probe.notes)
}

// PathMeta is the probe's path as every probe's part of meta.json holds it.
func (c *Common) PathMeta() recfile.ProbePath {
	return recfile.ProbePath{Path: c.Path(), Hooks: c.Hooks(), Reason: c.PathReason(), Notes: c.Notes()}
}

// Hooks names the kernel hooks of the path, for meta data.
func (c *Common) Hooks() []string { return c.Probe.Hooks() }

// Detach stops the probe: no program runs once it returns. Its counters
// stay readable until Close, and records already in its ring buffer are
// still delivered.
func (c *Common) Detach() error { return c.Probe.Detach() }

// Close detaches the probe and frees its kernel objects, the counters
// included.
func (c *Common) Close() error { return c.Probe.Close() }
