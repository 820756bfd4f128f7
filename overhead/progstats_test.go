package overhead

import (
	"maps"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
)

// TestFdinfoProgID reads program ids the way the kernel prints them for a
// program's and a link's descriptor, and none for a map's.
func TestFdinfoProgID(t *testing.T) {
	for _, c := range []struct {
		text string
		id   uint32
		ok   bool
	}{
		{"pos:\t0\nflags:\t02000002\nmnt_id:\t16\nino:\t1057\nprog_type:\t26\nprog_jited:\t1\nprog_tag:\tc0ffee\nmemlock:\t4096\nprog_id:\t4242\nrun_time_ns:\t0\n", 4242, true},
		{"pos:\t0\nflags:\t02000000\nlink_type:\ttracing\nlink_id:\t7\nprog_tag:\tc0ffee\nprog_id:\t17\nattach_type:\t24\n", 17, true},
		{"pos:\t0\nflags:\t02000002\nmap_type:\t27\nkey_size:\t0\nmap_id:\t99\n", 0, false},
	} {
		id, ok := fdinfoProgID([]byte(c.text))
		if uint32(id) != c.id || ok != c.ok {
			t.Errorf("fdinfoProgID(%q) = %d, %v; want %d, %v", c.text, id, ok, c.id, c.ok)
		}
	}
}

// TestSplitFrameProbe splits the programs of --match both's two socket
// probes by the maps each probe's programs hold (the ids of a real
// recording's, `bpftool prog show`), though both hold the scheduler's
// clocks; a single probe keeps source sockio.
func TestSplitFrameProbe(t *testing.T) {
	const clocks = 699 // held by both socket probes and the scheduler's switch program
	both := map[ebpf.ProgramID]progSample{
		465: {name: "sock_recv", source: "sockio", maps: []ebpf.MapID{704, 700, clocks}},
		466: {name: "sys_exit_splice", source: "sockio", maps: []ebpf.MapID{704, 708}},
		467: {name: "sock_send", source: "sockio", maps: []ebpf.MapID{708, 700, clocks}},
		475: {name: "switch_btf", source: "sched", maps: []ebpf.MapID{716, clocks}},
		476: {name: "wakeup_btf", source: "sched", maps: []ebpf.MapID{716}},
		479: {name: "sys_exit_splice", source: "sockio", maps: []ebpf.MapID{732, 727}},
		480: {name: "frame_sockstate", source: "sockio", maps: []ebpf.MapID{732, 733}},
		481: {name: "sock_send", source: "sockio", maps: []ebpf.MapID{733, 727, clocks}},
		482: {name: "sock_recv", source: "sockio", maps: []ebpf.MapID{clocks, 727}},
	}
	frameOnly := maps.Clone(both)
	for _, id := range []ebpf.ProgramID{465, 466, 467} {
		delete(frameOnly, id)
	}
	merged := maps.Clone(both) // a map of their own in common: one probe, as far as it can tell
	merged[482] = progSample{name: "sock_recv", source: "sockio", maps: []ebpf.MapID{727, 704}}
	for _, c := range []struct {
		name  string
		progs map[ebpf.ProgramID]progSample
		frame []ebpf.ProgramID
	}{
		{"both", both, []ebpf.ProgramID{479, 480, 481, 482}},
		{"frame only", frameOnly, nil},
		{"merged", merged, nil},
	} {
		split := maps.Clone(c.progs)
		splitFrameProbe(split)
		for id, p := range split {
			want := c.progs[id].source
			if slices.Contains(c.frame, id) {
				want = SourceSockioFrame
			}
			if p.source != want {
				t.Errorf("%s: program %d %s: source %s, want %s", c.name, id, p.name, p.source, want)
			}
		}
	}
}
