package netstack

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// oldGSOCSV is gso.csv's writer as it was before it wrote recfile.GSORow,
// kept to prove the file did not change by a byte.
func oldGSOCSV(path string, hists []Hist, names func(int) string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	w.WriteString("direction,ifname,segs,skbs\n")
	for _, h := range hists {
		for n, c := range h.SKBs {
			if c == 0 {
				continue
			}
			segs := strconv.Itoa(n)
			if n == Buckets {
				segs += "+"
			}
			fmt.Fprintf(w, "%s,%s,%s,%d\n", h.Dir, names(h.Ifindex), segs, c)
		}
	}
	w.Flush()
	return f.Close()
}

// TestGSOFileUnchanged: gso.csv as the old writer wrote it, with the last
// bucket's "+", names of interfaces gone since Start and never seen; and
// the summaries of meta.json.
func TestGSOFileUnchanged(t *testing.T) {
	in := Hist{Dir: In, Ifindex: 1_000_001, Total: 12, Segments: 2 + 3*5 + 200, MaxSegs: 200}
	in.SKBs[1], in.SKBs[3], in.SKBs[Buckets] = 10, 1, 1
	out := Hist{Dir: Out, Ifindex: 1_000_002, Total: 2, Segments: 2}
	out.SKBs[1] = 2
	dir, old := t.TempDir(), t.TempDir()
	s := &Source{
		env:       &source.Env{Out: testutil.OutDir(t, dir)},
		netnsPath: "/nonexistent/ns", // the namespace is gone with the target
		ifaces:    []net.Interface{{Index: 1_000_001, Name: "eth7"}},
		hists:     []Hist{in, out},
	}
	hists, err := s.writeGSO()
	if err != nil {
		t.Fatal(err)
	}
	if err := oldGSOCSV(filepath.Join(old, recfile.GSOFile), s.hists, s.ifnames()); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, recfile.GSOFile))
	want, _ := os.ReadFile(filepath.Join(old, recfile.GSOFile))
	if string(got) != string(want) || len(got) == 0 {
		t.Errorf("gso.csv:\n%s\nold writer:\n%s", got, want)
	}
	t.Logf("gso.csv:\n%s", got)
	if len(hists) != 2 || hists[0].Iface != "eth7" || hists[1].Iface != "if1000002" ||
		hists[0].MultiSegSKBs != 2 || hists[0].SegsPerSKB != float64(in.Segments)/12 || hists[1].MultiSegSKBs != 0 {
		t.Errorf("summaries %+v", hists)
	}
}
