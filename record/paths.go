package record

import (
	"slices"

	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// NotePrefix begins the lines a recording prints after its "attached" line
// for every probe that does not run on its first-choice path, and for what
// was done to the host for the probes (a filesystem mounted): no fallback is
// silent. Live views show them under the attached line.
const NotePrefix = "brokertrace: note: "

// probeNotes says which probes fell back and why, and what was done to the
// host for them, one line each ("sockio: syscalls path: fallback: …").
func (r *recorder) probeNotes() []string {
	type probe struct {
		name string
		p    recfile.ProbePath
	}
	all := []probe{{"sockio", r.meta.Probe.ProbePath}}
	for _, src := range r.running {
		if pr, ok := src.(source.Prober); ok {
			all = append(all, probe{src.Name(), pr.ProbePath()})
		}
	}
	var lines, notes []string
	for _, pr := range all {
		if pr.p.Reason != recfile.FirstChoice {
			lines = append(lines, pr.name+": "+pr.p.Path+" path: "+pr.p.Reason)
		}
		for _, n := range pr.p.Notes {
			if !slices.Contains(notes, n) {
				notes = append(notes, n)
			}
		}
	}
	if r.meta.Probe.Walk != "" && r.meta.Probe.Walk != "bpf_loop" {
		lines = append(lines, "sockio: "+r.meta.Probe.Walk+" walk: "+r.meta.Probe.WalkReason)
	}
	return append(lines, notes...)
}
