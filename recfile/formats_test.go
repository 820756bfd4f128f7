package recfile

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// docColumns maps each "## " section of docs/formats.md to the names it
// shows in code spans of their own: `a` names a, a header line `a,b,c`
// names a, b and c; a formula like `t_in_ns − t_arrive_ns` names nothing.
func docColumns(t *testing.T) map[string]map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../docs/formats.md")
	if err != nil {
		t.Fatal(err)
	}
	spans := regexp.MustCompile("`([A-Za-z0-9_,+]+)`")
	sections := map[string]map[string]bool{}
	var cur map[string]bool
	for line := range strings.SplitSeq(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			cur = map[string]bool{}
			sections[h] = cur
			continue
		}
		if cur == nil {
			continue
		}
		for _, m := range spans.FindAllStringSubmatch(line, -1) {
			for name := range strings.SplitSeq(m[1], ",") {
				cur[name] = true
			}
		}
	}
	return sections
}

// TestFormatsDocListsEveryColumn fails when a file gains a column that
// docs/formats.md does not explain in the file's section.
func TestFormatsDocListsEveryColumn(t *testing.T) {
	files := []struct {
		file string
		cols []string
	}{
		{MessagesFile, MessageColumns},
		{MessagesFile, SchedMessageColumns},
		{MessagesFile, SockqMessageColumns},
		{E2EFile, Columns[E2ERow]()},
		{SubsFile, Columns[SubRow]()},
		{SchedFile, Columns[SchedRow]()},
		{ThreadsFile, Columns[ThreadRow]()},
		{CPUFile, Columns[CPURow]()},
		{CPUPerMsgFile, Columns[CPUPerMsgRow]()},
		{CPUCoresFile, Columns[CPUCoreRow]()},
		{PacketsFile, Columns[PacketRow]()},
		{NetFile, Columns[NetRow]()},
		{GSOFile, Columns[GSORow]()},
		{ThreadWindowsFile, Columns[ThreadWindowRow]()},
		{GCStintsFile, Columns[GCStintRow]()},
		{ConnectionsFile, Columns[ConnectionRow]()},
		{HopsFile, Columns[HopRow]()},
		{CalPausesFile, Columns[CalPauseRow]()},
		{MatchCheckFile, Columns[MatchCheckRow]()},
		{PlatformSamplesDir + "/", Columns[PlatformSample]()},
	}
	sections := docColumns(t)
	for _, f := range files {
		documented := map[string]bool{}
		found := false
		for h, names := range sections {
			if strings.Contains(h, f.file) || (f.file == MessagesFile && (strings.Contains(h, f.cols[0]))) {
				found = true
				for n := range names {
					documented[n] = true
				}
			}
		}
		if !found {
			t.Errorf("docs/formats.md has no section for %s", f.file)
		}
		for _, c := range f.cols {
			if !documented[c] {
				t.Errorf("docs/formats.md does not explain column %s of %s", c, f.file)
			}
		}
	}
}
