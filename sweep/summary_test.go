package sweep

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestCPUSystemExact: a step's system_util is the exact busy time when
// every row in the window has it, else /proc/stat's tick-sampled one,
// and says which.
func TestCPUSystemExact(t *testing.T) {
	in := func(int64) bool { return true }
	for _, c := range []struct {
		name     string
		gap      bool   // one row without the exact column
		source   string // meta.json's exact_busy_source; "": no meta.json
		want     float64
		wantFrom string
	}{{"exact", false, "", 0.6, "cpuidle"}, {"exact from the timer list", false, "timer_list", 0.6, "timer_list"},
		{"a row without", true, "timer_list", 0.1, "proc_stat"}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			rows := []recfile.CPURow{
				{TStart: 0, TEnd: 100, BrokerCgroup: 0.5, System: 0.1, SystemExact: 0.6},
				{TStart: 100, TEnd: 200, BrokerCgroup: 0.5, System: 0.1, SystemExact: 0.6},
			}
			if c.gap {
				rows[1].SystemExact = math.NaN()
			}
			if err := recfile.WriteTable(testutil.OutDir(t, dir), recfile.CPUFile, rows); err != nil {
				t.Fatal(err)
			}
			if c.source != "" {
				meta := recfile.Meta{Sources: map[string]recfile.SourceMeta{"cpu": {Meta: map[string]any{"exact_busy_source": c.source}}}}
				if err := recfile.WriteJSON(testutil.OutDir(t, dir), recfile.MetaFile, &meta, outdir.FilePerm); err != nil {
					t.Fatal(err)
				}
			}
			var st recfile.SweepStep
			if err := cpu(dir, &st, in); err != nil {
				t.Fatal(err)
			}
			if math.Abs(st.SystemUtil-c.want) > 1e-9 || st.SystemUtilSource != c.wantFrom || st.BrokerUtil != 0.5 {
				t.Errorf("system_util %v from %q, broker %v; want %v from %q", st.SystemUtil, st.SystemUtilSource, st.BrokerUtil, c.want, c.wantFrom)
			}
		})
	}
}

// TestArrivalCV: arrival_cv is taken from the messages' arrivals on the
// socket, not their reads: 30 messages arriving 1 ms apart, read in
// threes (a broker that batches its reads), give 0, where the reads'
// gaps would give √2. One message without t_arrive_ns leaves it absent.
func TestArrivalCV(t *testing.T) {
	write := func(unknown int) string {
		dir := t.TempDir()
		mw, err := recfile.CreateMessages(testutil.OutDir(t, dir), recfile.SockqMessageColumns)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			arrive := int64(1e9) + int64(i)*1e6
			tin := int64(1e9) + int64(i/3*3+2)*1e6 // the third of each three
			extra := fmt.Appendf(nil, ",%d,%d", arrive, tin-arrive)
			if i == unknown {
				extra = []byte(",,")
			}
			if err := mw.Write(&recfile.Message{ID: uint64(i), TIn: tin, TOut: tin + 5000, Latency: 5000, Copy: 1}, extra); err != nil {
				t.Fatal(err)
			}
		}
		if err := mw.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	in := func(int64) bool { return true }
	var st recfile.SweepStep
	if err := latency(write(-1), &st, in); err != nil {
		t.Fatal(err)
	}
	if st.Messages != 30 || st.ArrivalCV == nil || *st.ArrivalCV > 1e-9 {
		t.Errorf("messages %d, arrival_cv %s: want 30 and 0 (arrivals 1 ms apart)", st.Messages, fmtCV(st.ArrivalCV))
	}
	st.Pattern = PatternRegular
	if w := clumped(&st); w != "" {
		t.Errorf("regular arrivals called clumped: %s", w)
	}
	cv := 1.5
	st.ArrivalCV = &cv
	if w := clumped(&st); !strings.Contains(w, "arrival_cv 1.50") {
		t.Errorf("arrival_cv 1.5: warning %q", w)
	}
	st = recfile.SweepStep{}
	if err := latency(write(7), &st, in); err != nil {
		t.Fatal(err)
	}
	if st.ArrivalCV != nil {
		t.Errorf("arrival_cv %v with one arrival unknown: want it absent", *st.ArrivalCV)
	}
}

func fmtCV(v *float64) string {
	if v == nil {
		return "absent"
	}
	return fmt.Sprintf("%.6f", *v)
}
