package overhead

import (
	"bufio"
	"bytes"
	"cmp"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/recfile"
)

// sourceOf is the source of a program: NAME for a program of
// bpf/NAME.bpf.c, by the file its BTF line information names (the kernel
// keeps it with the program since Linux 5.0, older than the run-time
// statistics), or other (the tool's name) for a program without it, such
// as bpftrace's.
func sourceOf(info *ebpf.ProgramInfo, other string) string {
	li, err := info.LineInfos()
	if err != nil || len(li) == 0 || li[0].Line == nil {
		return other
	}
	if src, ok := strings.CutSuffix(filepath.Base(li[0].Line.FileName()), ".bpf.c"); ok {
		return src
	}
	return other
}

// progSample is one program's cumulative run-time statistics.
type progSample struct {
	name, source string
	runs, ns     uint64
	maps         []ebpf.MapID
}

// SourceSockioFrame is the source of the programs of --match both's
// second socket probe, the one matching by frame.
const SourceSockioFrame = "sockio-frame"

// frameProgram is the program only a socket probe matching by frame loads.
const frameProgram = "frame_sockstate"

// splitFrameProbe puts the programs of --match both's frame probe under
// SourceSockioFrame when the process holds two socket probes. Each probe
// has maps of its own (they share only maps that other sources' programs
// hold too, the scheduler's clocks), so the socket programs linked by
// their own maps fall into one group per probe, and the frame probe's is
// the group with frameProgram. A single probe, by marker or by frame,
// keeps source sockio.
func splitFrameProbe(s map[ebpf.ProgramID]progSample) {
	foreign := map[ebpf.MapID]bool{}
	for _, p := range s {
		if p.source != "sockio" {
			for _, m := range p.maps {
				foreign[m] = true
			}
		}
	}
	owner := map[ebpf.MapID]ebpf.ProgramID{} // a map's first program
	group := map[ebpf.ProgramID]ebpf.ProgramID{}
	var find func(ebpf.ProgramID) ebpf.ProgramID
	find = func(id ebpf.ProgramID) ebpf.ProgramID {
		if g := group[id]; g != id {
			group[id] = find(g)
		}
		return group[id]
	}
	for _, id := range slices.Sorted(maps.Keys(s)) {
		if s[id].source != "sockio" {
			continue
		}
		group[id] = id
		for _, m := range s[id].maps {
			if o, ok := owner[m]; ok && !foreign[m] {
				group[find(id)] = find(o)
			} else if !ok {
				owner[m] = id
			}
		}
	}
	roots := map[ebpf.ProgramID]bool{}
	var frameRoot ebpf.ProgramID
	frames := 0
	for id := range group {
		roots[find(id)] = true
		if s[id].name == frameProgram {
			frameRoot, frames = find(id), frames+1
		}
	}
	if frames != 1 || len(roots) < 2 {
		return // no frame probe, a single probe, or probes it cannot tell apart
	}
	for id := range group {
		if find(id) == frameRoot {
			p := s[id]
			p.source = SourceSockioFrame
			s[id] = p
		}
	}
}

// enableProgStats turns the kernel's BPF run-time statistics on until the
// returned closer is closed. They are off by default because each program
// run then reads the clock twice: their own cost is charged to the
// programs they measure, and to the broker, so they are on only in the
// fixed-rate phase, never while throughput or latency is measured.
// BPF_ENABLE_STATS needs Linux 5.8; older kernels get no per-program
// figures (a nil closer) and the rest of the run goes on.
func enableProgStats() io.Closer {
	c, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		return nil
	}
	return c
}

// heldPrograms are the ids of the BPF programs process pid holds: by a
// program descriptor or through a link's. /proc/PID/fdinfo names them
// exactly, where a scan of every program on the machine would have to
// guess from load times and names which are the tracer's.
func heldPrograms(pid int) []ebpf.ProgramID {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fdinfo")
	ents, _ := os.ReadDir(dir)
	var ids []ebpf.ProgramID
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if id, ok := fdinfoProgID(b); ok && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// fdinfoProgID is the "prog_id:" of an fdinfo file (program and link
// descriptors have one).
func fdinfoProgID(b []byte) (ebpf.ProgramID, bool) {
	for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "prog_id:"); ok {
			id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			return ebpf.ProgramID(id), err == nil
		}
	}
	return 0, false
}

// sampleProgs reads the statistics of every program pid holds; other is
// the source of programs that are not brokertrace's.
func sampleProgs(pid int, other string) map[ebpf.ProgramID]progSample {
	out := map[ebpf.ProgramID]progSample{}
	for _, id := range heldPrograms(pid) {
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // unloaded meanwhile
		}
		info, ierr := p.Info()
		st, serr := p.Stats()
		p.Close()
		if ierr == nil && serr == nil {
			ids, _ := info.MapIDs()
			out[id] = progSample{name: info.Name, source: sourceOf(info, other), runs: st.RunCount, ns: uint64(st.Runtime.Nanoseconds()), maps: ids}
		}
	}
	splitFrameProbe(out)
	return out
}

// progCost is each program's cost between two samples, over messages;
// programs not in before were loaded in between and count from zero.
func progCost(before, after map[ebpf.ProgramID]progSample, messages int) []recfile.OverheadProg {
	var out []recfile.OverheadProg
	for id, a := range after {
		b := before[id]
		out = append(out, costOf(recfile.OverheadProg{
			Source: a.source, Name: a.name, ID: uint32(id), Runs: a.runs - b.runs, Ns: a.ns - b.ns,
		}, messages))
	}
	sortProgs(out)
	return out
}

// costOf fills p's ratios.
func costOf(p recfile.OverheadProg, messages int) recfile.OverheadProg {
	p.Messages = messages
	if p.Runs > 0 {
		p.NsPerRun = float64(p.Ns) / float64(p.Runs)
	}
	if messages > 0 {
		p.NsPerMsg = float64(p.Ns) / float64(messages)
	}
	return p
}

func sortProgs(ps []recfile.OverheadProg) {
	slices.SortFunc(ps, func(a, b recfile.OverheadProg) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
}

// sumProgs adds each program's cost up over runs, by source and name.
func sumProgs(runs []recfile.OverheadRun) []recfile.OverheadProg {
	type key struct{ source, name string }
	sums := map[key]recfile.OverheadProg{}
	for _, r := range runs {
		for _, p := range r.Progs {
			k := key{p.Source, p.Name}
			s := sums[k]
			s.Source, s.Name = p.Source, p.Name
			s.Runs, s.Ns, s.Messages = s.Runs+p.Runs, s.Ns+p.Ns, s.Messages+p.Messages
			sums[k] = s
		}
	}
	out := make([]recfile.OverheadProg, 0, len(sums))
	for _, s := range sums {
		out = append(out, costOf(s, s.Messages))
	}
	sortProgs(out)
	return out
}
