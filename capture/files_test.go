package capture

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// The writers of packets.csv and net.csv as they were before they wrote
// recfile's row types, kept to prove the files did not change by a byte.

func oldPacketsCSV(r *Result, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "direction,payload_bytes,packets")
	for _, d := range r.directions() {
		var sizes []int
		for k := range d.h.Sizes {
			sizes = append(sizes, k)
		}
		sort.Ints(sizes)
		for _, s := range sizes {
			fmt.Fprintf(w, "%s,%d,%d\n", d.name, s, d.h.Sizes[s])
		}
	}
	w.Flush()
	return f.Close()
}

func oldRatio(n uint64, msgs int) string {
	if msgs == 0 {
		return ""
	}
	return strconv.FormatFloat(float64(n)/float64(msgs), 'f', -1, 64)
}

func oldNetCSV(s *Source, tl *source.Timeline, path string) error {
	r := s.result
	wins := slices.Clone(s.windows)
	final := Snapshot{At: r.End, In: Counts{r.In.Packets, r.In.PayloadBytes}, Out: Counts{r.Out.Packets, r.Out.PayloadBytes}, Drops: r.Drops}
	if len(wins) == 0 {
		wins = append(wins, window{end: r.End})
	}
	wins[len(wins)-1].snap = final
	start := min(s.env.Start, s.first.At)
	if start == 0 {
		start = s.first.At
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	w.WriteString("t_start_ns,t_end_ns,msgs_in,msgs_out,pkts_in,pkts_out,bytes_in,bytes_out,pkts_per_msg_in,pkts_per_msg_out,bytes_per_msg_in,bytes_per_msg_out\n")
	prev := s.first
	prev.In, prev.Out = Counts{}, Counts{}
	from := start
	for _, win := range wins {
		cur := win.snap
		mi, mo := tl.InBetween(from, win.end), tl.OutBetween(from, win.end)
		pi, po := cur.In.Packets-prev.In.Packets, cur.Out.Packets-prev.Out.Packets
		bi, bo := cur.In.PayloadBytes-prev.In.PayloadBytes, cur.Out.PayloadBytes-prev.Out.PayloadBytes
		fmt.Fprintf(w, "%d,%d,%d,%d,%d,%d,%d,%d,%s,%s,%s,%s\n", from, win.end, mi, mo, pi, po, bi, bo,
			oldRatio(pi, mi), oldRatio(po, mo), oldRatio(bi, mi), oldRatio(bo, mo))
		prev, from = cur, win.end
	}
	w.Flush()
	return f.Close()
}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(x) != string(y) {
		t.Errorf("%s differs from the old writer's:\n%s\nold:\n%s", filepath.Base(a), x, y)
	}
}

// TestFilesUnchanged writes packets.csv and net.csv with the writers and
// with the old ones: windows with and without messages, ratios that are
// not short decimals, an empty capture.
func TestFilesUnchanged(t *testing.T) {
	r := &Result{
		In:  Histogram{Sizes: map[int]uint64{0: 7, 1448: 3, 65483: 1, 31: 100}},
		Out: Histogram{Sizes: map[int]uint64{0: 2, 17: 1 << 40}},
		End: 9_000,
	}
	r.In.Packets, r.In.PayloadBytes = 111, 1448*3+65483+3100
	r.Out.Packets, r.Out.PayloadBytes = 2+1<<40, 17<<40
	snap := func(at int64, pi, bi, po, bo uint64) Snapshot {
		return Snapshot{At: at, In: Counts{pi, bi}, Out: Counts{po, bo}}
	}
	tl := &source.Timeline{In: []int64{1_500, 2_100, 2_200, 2_300, 7_000}, Out: []int64{2_500, 2_600, 2_700, 6_999, 9_500}}
	for _, tc := range []struct {
		name    string
		r       *Result
		start   int64
		first   Snapshot
		windows []window
		tl      *source.Timeline
	}{
		{"windows", r, 1_000, snap(1_200, 5, 5, 5, 5), []window{
			{2_000, snap(2_000, 3, 100, 0, 0)},
			{3_000, snap(3_000, 10, 3_333, 7, 77)},
			{5_000, snap(5_000, 10, 3_333, 7, 77)},
			{7_000, snap(7_000, 11, 5_000, 9, 99)},
		}, tl},
		{"one window", r, 0, snap(1_200, 0, 0, 0, 0), nil, tl},
		{"empty", &Result{In: Histogram{Sizes: map[int]uint64{}}, Out: Histogram{Sizes: map[int]uint64{}}, End: 50}, 10, snap(20, 0, 0, 0, 0), nil, &source.Timeline{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, old := t.TempDir(), t.TempDir()
			s := &Source{env: &source.Env{Out: testutil.OutDir(t, dir), Start: tc.start}, first: tc.first, windows: tc.windows, result: tc.r}
			if err := tc.r.WriteCSV(testutil.OutDir(t, dir), recfile.PacketsFile); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.writeNet(tc.tl); err != nil {
				t.Fatal(err)
			}
			if err := oldPacketsCSV(tc.r, filepath.Join(old, recfile.PacketsFile)); err != nil {
				t.Fatal(err)
			}
			if err := oldNetCSV(s, tc.tl, filepath.Join(old, recfile.NetFile)); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{recfile.PacketsFile, recfile.NetFile} {
				sameFile(t, filepath.Join(dir, f), filepath.Join(old, f))
			}
		})
	}
}
