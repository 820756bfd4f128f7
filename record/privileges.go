package record

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"

	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/privs"
	"github.com/brokertrace/brokertrace/probes"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// Privileges drops brokertrace's capabilities once a recording has
// attached: loading and attaching probes, opening sockets and files in
// other namespaces need root, but what follows — reading ring buffers,
// /proc and cgroup files, writing the recording — needs almost nothing,
// and whatever parses the broker's traffic and the kernel's files then
// runs with only what it needs. The drop is for the whole process and for
// good, so recordings that run in one process at once (bare --all) share
// one Privileges, which drops once every one of them has attached or
// failed, keeping what any of them needs.
type Privileges struct {
	mu       sync.Mutex
	waiting  int // recordings not yet attached or failed
	attached int
	needs    []privs.Need
	state    recfile.Privileges
	dropped  bool
	err      error
}

// NewPrivileges returns the Privileges of n recordings that run at once.
func NewPrivileges(n int) *Privileges { return &Privileges{waiting: n} }

// attach says a recording has attached and what it needs from now on;
// the last recording to attach or fail drops.
func (p *Privileges) attach(needs []privs.Need) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.needs = append(p.needs, needs...)
	p.attached++
	p.arrived()
}

// Abandon counts out a recording that ends before it attaches, or never
// runs, so that the others still drop. Run calls it itself; a caller calls
// it for a recording it counted in NewPrivileges and never hands to Run.
func (p *Privileges) Abandon() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.arrived()
}

// arrived counts a recording in and drops after the last; p.mu is held,
// so that no check of a need (privs.WithEffective) runs during the drop.
func (p *Privileges) arrived() {
	if p.waiting--; p.waiting > 0 || p.attached == 0 {
		return
	}
	kept := privs.Needed(p.needs)
	if p.err = privs.Drop(slices.Collect(maps.Keys(kept))...); p.err != nil {
		return
	}
	p.dropped = true
	p.state = current()
	p.state.DroppedNs = monotime.Now()
	for c, why := range kept {
		if slices.Contains(p.state.Effective, c.String()) {
			p.state.Kept[c.String()] = why
		}
	}
}

// meta is meta.json's privileges: as dropped, or as they are now and why
// they were not dropped.
func (p *Privileges) meta() recfile.Privileges {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropped {
		return p.state
	}
	st := current()
	switch {
	case p.err != nil:
		st.NotDropped = "dropping them failed: " + p.err.Error()
	case p.waiting > 0:
		st.NotDropped = "not before every recording of this process has attached"
	default:
		st.NotDropped = "the recording ended before it attached"
	}
	return st
}

// current is the calling thread's capabilities as meta.json shows them.
func current() recfile.Privileges {
	st, err := privs.Current()
	m := recfile.Privileges{Effective: st.Effective.Names(), Permitted: st.Permitted.Names(),
		Bounding: st.Bounding.Names(), NoNewPrivs: st.NoNewPrivs, Kept: map[string]string{}}
	if err != nil {
		m.NotDropped = err.Error()
	}
	return m
}

// keptPrivileges is meta.json's privileges of a recording that does not
// drop, and why.
func keptPrivileges(cfg *Config) recfile.Privileges {
	m := current()
	if cfg.KeepPrivileges {
		m.NotDropped = "asked to keep them (--keep-privileges)"
	} else {
		m.NotDropped = fmt.Sprintf("not running as root (euid %d)", os.Geteuid())
	}
	return m
}

// needs is what the recording goes on doing once attached that may need a
// capability: the probes' maps, writing the files, what its sources and
// its caller say.
func (r *recorder) needs() []privs.Need {
	needs := []privs.Need{probes.MapAccessNeed()}
	if _, sudo := outdir.Invoker(); !r.cfg.Discard && !sudo {
		// Under sudo the files are created with the invoking user's
		// rights, which the drop does not touch (outdir); as root they
		// are created, and existing ones replaced by rename, in a
		// directory root must be able to write by its mode.
		out := r.cfg.Out
		needs = append(needs, privs.Need{
			Caps:  []privs.Cap{privs.CAP_DAC_OVERRIDE},
			Why:   "writing the recording into " + out + ", which root may not write by its mode",
			Check: func() error { return privs.Writable(out) },
		})
	}
	for _, s := range r.running {
		if p, ok := s.(source.Privileged); ok {
			needs = append(needs, p.Needs()...)
		}
	}
	return append(needs, r.cfg.Needs...)
}

// attached drops the capabilities, or counts the recording in for a drop
// shared with others, once every probe and source is live.
func (r *recorder) attached() {
	if r.priv != nil && !r.privArrived {
		r.privArrived = true
		r.priv.attach(r.needs())
	}
}

// notAttached counts a recording that ended before attaching out of a
// shared drop, so that the others still drop.
func (r *recorder) notAttached() {
	if r.priv != nil && !r.privArrived {
		r.privArrived = true
		r.priv.Abandon()
	}
}

// privileges is meta.json's privileges.
func (r *recorder) privileges() recfile.Privileges {
	if r.priv == nil {
		return keptPrivileges(&r.cfg)
	}
	return r.priv.meta()
}

// privNote says, among the notes after the attached line, that the drop
// failed: the recording goes on with every capability.
func (r *recorder) privNote() []string {
	if r.priv == nil {
		return nil
	}
	r.priv.mu.Lock()
	defer r.priv.mu.Unlock()
	if r.priv.err == nil {
		return nil
	}
	return []string{"capabilities not dropped: " + r.priv.err.Error()}
}
