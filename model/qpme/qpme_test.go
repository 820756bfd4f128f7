package qpme

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/brokertrace/brokertrace/recfile"
)

// acceptSamples is a skewed demand distribution with known range:
// 5 µs + 20 µs·x², x evenly spread over [0, 1).
func acceptSamples() []float64 {
	out := make([]float64, 2000)
	for i := range out {
		x := float64((i*7919)%2000) / 2000
		out[i] = 5000 + 20000*x*x
	}
	return out
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func lines(v []float64) string {
	var b strings.Builder
	for _, x := range v {
		fmt.Fprintf(&b, "%g\n", x)
	}
	return b.String()
}

// fixture is a calibration built by hand: accept-msg and dispatch have
// demand files (dispatch's mean is 0.96 of its samples', as after the
// paper's overhead scaling), process and system only means; GC every
// 3 messages for 2 ms.
func fixture(acks bool) (*recfile.Calibration, fstest.MapFS) {
	acc := acceptSamples()
	disp := []float64{8000, 9000, 10000, 11000, 12000, 30000}
	cal := &recfile.Calibration{Sweep: "sweep1", Broker: "activemq", CPUs: 1,
		Params: []recfile.CalParam{
			{Name: recfile.CalGCThreshold, Value: 3, Unit: "messages"},
			{Name: recfile.CalGCPause, Value: 2e6, Unit: "ns"},
		},
		Stages: []recfile.CalStage{
			{Name: "accept-msg", Role: "reads", MeanNs: mean(acc), DemandFile: "demands/accept-msg.txt"},
			{Name: "process", Role: "between", MeanNs: 7000},
			{Name: "dispatch", Role: "writes", MeanNs: 0.96 * mean(disp), DemandFile: "demands/dispatch.txt"},
			{Name: "system", Role: "outside", MeanNs: 9000},
		}}
	if acks {
		cal.Stages = append(cal.Stages, recfile.CalStage{Name: "accept-ack", Role: "reads", MeanNs: 3000})
	}
	fsys := fstest.MapFS{
		"demands/accept-msg.txt": {Data: []byte(lines(acc))},
		"demands/dispatch.txt":   {Data: []byte(lines(disp))},
	}
	return cal, fsys
}

func export(t *testing.T, cal *recfile.Calibration, opt Options) (*node, map[string][]byte) {
	t.Helper()
	var buf bytes.Buffer
	files, err := Write(&buf, cal, opt)
	if err != nil {
		t.Fatal(err)
	}
	net, err := parseNet(buf.Bytes())
	if err != nil {
		t.Fatalf("the .qpe does not parse: %v\n%s", err, buf.String())
	}
	m := map[string][]byte{}
	for _, f := range files {
		m[f.Name] = f.Data
	}
	return net, m
}

func names(ns []*node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.get("name"))
	}
	slices.Sort(out)
	return out
}

func TestWriteFollowsSchema(t *testing.T) {
	for _, tc := range []struct {
		acks bool
		opt  Options
	}{
		{false, Options{Rate: 5000}},
		{true, Options{Rate: 5000, Pattern: PatternBursty, Burst: 10, Strategy: StrategyFCFS}},
		{false, Options{Rate: 5000, Pattern: PatternPoisson}},
	} {
		cal, fsys := fixture(tc.acks)
		tc.opt.Demands = fsys
		net, _ := export(t, cal, tc.opt)
		for _, e := range checkNet(net) {
			t.Errorf("acks=%v %s %s: %s", tc.acks, tc.opt.Pattern, tc.opt.Strategy, e)
		}
		places := []string{"accept-msg", "arrivals", "dispatch", "gc-active", "gc-idle", "input", "process", "queue", "system"}
		colors := []string{"arrival", "collector", "garbage", "msg"}
		if tc.acks {
			places = append(places, "accept-ack")
			colors = append(colors, "ack")
			slices.Sort(places)
			slices.Sort(colors)
		}
		if got := names(net.kids("places", "place")); !slices.Equal(got, places) {
			t.Errorf("places %v, want %v", got, places)
		}
		if got := names(net.kids("colors", "color")); !slices.Equal(got, colors) {
			t.Errorf("colours %v, want %v", got, colors)
		}
	}
}

// TestSchemaCheckFails shows the checker catches each kind of fault it is
// there for, on an otherwise valid export.
func TestSchemaCheckFails(t *testing.T) {
	cal, fsys := fixture(true)
	var buf bytes.Buffer
	if _, err := Write(&buf, cal, Options{Rate: 1000, Demands: fsys}); err != nil {
		t.Fatal(err)
	}
	good := buf.String()
	for _, tc := range []struct{ what, old, new, want string }{
		{"dangling colour", `color-id="_c_ack"`, `color-id="_c_nack"`, "does not name"},
		{"dangling queue", `queue-ref="_q_cpu"`, `queue-ref="_q_gpu"`, "does not name"},
		{"incidence to a place", `target-id="_cr_system_msg"`, `target-id="_p_system"`, "does not name"},
		{"duplicate id", `id="_c_ack"`, `id="_c_msg"`, "defined twice"},
		{"missing attribute", `departure-discipline="NORMAL"`, ``, "lacks required attribute departure-discipline"},
		{"bad strategy", `strategy="PS"`, `strategy="CS"`, "strategy"},
		{"bad distribution", `distribution-function="Exponential"`, `distribution-function="Exp"`, "distribution-function"},
		{"probe to a transition", `end-place-id="_p_dispatch"`, `end-place-id="_t_sent"`, "does not name"},
	} {
		bad := strings.Replace(good, tc.old, tc.new, 1)
		if bad == good {
			t.Fatalf("%s: %q not in the export", tc.what, tc.old)
		}
		net, err := parseNet([]byte(bad))
		if err != nil {
			t.Fatal(err)
		}
		errs := checkNet(net)
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, tc.want) }) {
			t.Errorf("%s: the check did not complain about %q; it said %q", tc.what, tc.want, errs)
		}
	}
}

// distMean is the mean of a queueing colour reference's distribution in
// seconds, computed from the attributes and the pdf file as SimQPN draws.
func distMean(t *testing.T, r *node, files map[string][]byte) float64 {
	t.Helper()
	f := func(a string) float64 {
		v, err := strconv.ParseFloat(r.get(a), 64)
		if err != nil {
			t.Fatalf("%s %s=%q: %v", r.get("id"), a, r.get(a), err)
		}
		return v
	}
	switch r.get("distribution-function") {
	case "Exponential":
		return 1 / f("lambda")
	case "Empirical":
		p := pdfOf(t, files, r.get("pdf_filename"))
		k, total, s := float64(len(p)), 0.0, 0.0
		for i, w := range p {
			total += w
			s += w * (float64(i) + 0.5) / k
		}
		return f("offset") + f("scale")*s/total
	}
	t.Fatalf("%s: unexpected distribution %q", r.get("id"), r.get("distribution-function"))
	return 0
}

func pdfOf(t *testing.T, files map[string][]byte, name string) []float64 {
	data, ok := files[name]
	if !ok {
		t.Fatalf("pdf file %q was not written", name)
	}
	var p []float64
	for _, s := range strings.Split(strings.TrimSpace(string(data)), ";") {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p = append(p, v)
	}
	return p
}

// quantile of an Empirical distribution (linear within bins), in seconds.
func quantile(t *testing.T, r *node, files map[string][]byte, q float64) float64 {
	p := pdfOf(t, files, r.get("pdf_filename"))
	off, _ := strconv.ParseFloat(r.get("offset"), 64)
	scale, _ := strconv.ParseFloat(r.get("scale"), 64)
	cum := 0.0
	for i, w := range p {
		if cum+w >= q {
			return off + scale*(float64(i)+(q-cum)/w)/float64(len(p))
		}
		cum += w
	}
	return off + scale
}

func refOf(t *testing.T, net *node, place string) *node {
	t.Helper()
	for _, p := range net.kids("places", "place") {
		if p.get("name") == place {
			return p.kids("color-refs", "color-ref")[0]
		}
	}
	t.Fatalf("no place %q", place)
	return nil
}

func TestDemandsMatchCalibration(t *testing.T) {
	cal, fsys := fixture(true)
	net, files := export(t, cal, Options{Rate: 1000, Demands: fsys})
	for _, st := range cal.Stages {
		r := refOf(t, net, st.Name)
		want := st.MeanNs / 1e9 // TimeUnit: seconds
		if got := distMean(t, r, files); math.Abs(got-want) > 1e-12*want {
			t.Errorf("%s: mean demand %g s, calibration says %g s", st.Name, got, want)
		}
		wantFn := "Exponential"
		if st.DemandFile != "" {
			wantFn = "Empirical"
		}
		if fn := r.get("distribution-function"); fn != wantFn {
			t.Errorf("%s: %s distribution, want %s", st.Name, fn, wantFn)
		}
	}
	// The shape survives: the Empirical median is the samples' median to
	// within a bin (20 µs range / 50 bins = 400 ns).
	acc := acceptSamples()
	slices.Sort(acc)
	med := (acc[999] + acc[1000]) / 2
	if got := quantile(t, refOf(t, net, "accept-msg"), files, 0.5) * 1e9; math.Abs(got-med) > 400 {
		t.Errorf("accept-msg median %.0f ns, samples' %.0f ns", got, med)
	}
	// GC pause and regular arrivals: constant delays.
	for place, want := range map[string]float64{"gc-active": 2e-3, "arrivals": 1e-3} {
		r := refOf(t, net, place)
		if got := distMean(t, r, files); math.Abs(got-want) > 1e-15 || r.get("scale") != "0" {
			t.Errorf("%s: delay %g s (scale %s), want a constant %g s", place, got, r.get("scale"), want)
		}
	}
}

func TestArrivalPatterns(t *testing.T) {
	cal, _ := fixture(false)
	net, _ := export(t, cal, Options{Rate: 4000, Pattern: PatternPoisson})
	if r := refOf(t, net, "arrivals"); r.get("distribution-function") != "Exponential" || r.get("lambda") != "4000" {
		t.Errorf("poisson arrivals: %s lambda=%s, want Exponential lambda=4000 (per s)", r.get("distribution-function"), r.get("lambda"))
	}
	net, files := export(t, cal, Options{Rate: 4000, Pattern: PatternBursty, Burst: 8})
	if got := distMean(t, refOf(t, net, "arrivals"), files); math.Abs(got-8.0/4000) > 1e-15 {
		t.Errorf("bursty arrivals every %g s, want 8/4000 s", got)
	}
	g := newGame(t, net)
	g.fire(t, "arrive")
	if n := g.tokens["_p_input"]["_c_msg"]; n != 8 {
		t.Errorf("one burst put %d messages into input, want 8", n)
	}
}

func TestWriteErrors(t *testing.T) {
	cal, fsys := fixture(false)
	if _, err := Write(&bytes.Buffer{}, cal, Options{Rate: 0}); err == nil || !strings.Contains(err.Error(), "rate") {
		t.Errorf("rate 0: error %v, want one about the rate", err)
	}
	short := *cal
	short.Stages = cal.Stages[3:] // system only
	if _, err := Write(&bytes.Buffer{}, &short, Options{Rate: 1}); err == nil || !strings.Contains(err.Error(), "accept-msg") {
		t.Errorf("no broker stage: error %v, want one naming the stages", err)
	}
	fsys["demands/dispatch.txt"] = &fstest.MapFile{Data: []byte("100\n200\nabc\n")}
	if _, err := Write(&bytes.Buffer{}, cal, Options{Rate: 1, Demands: fsys}); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("bad demand file: error %v, want one naming line 3", err)
	}
}

// TestStrategies: ps puts every stage on one PS queue with the broker's
// CPUs as servers; fcfs gives each broker stage a one-server FCFS queue.
func TestStrategies(t *testing.T) {
	cal, fsys := fixture(false)
	cal.CPUs = 2
	for _, strategy := range []string{StrategyPS, StrategyFCFS} {
		net, _ := export(t, cal, Options{Rate: 1000, Demands: fsys, Strategy: strategy})
		queues := map[string]*node{}
		for _, q := range net.kids("queues", "queue") {
			queues[q.get("id")] = q
		}
		for _, st := range cal.Stages {
			var q *node
			for _, p := range net.kids("places", "place") {
				if p.get("name") == st.Name {
					q = queues[p.get("queue-ref")]
				}
			}
			want := [2]string{"PS", "2"} // strategy, servers
			name := "cpu"
			if strategy == StrategyFCFS {
				name = st.Name
				if st.Name != "system" {
					want = [2]string{"FCFS", "1"}
				}
			}
			if q == nil {
				t.Fatalf("%s: stage %s has no queue", strategy, st.Name)
			}
			if q.get("name") != name || q.get("strategy") != want[0] || q.get("number-of-servers") != want[1] {
				t.Errorf("%s: stage %s on queue %s (%s, %s servers), want %s (%s, %s servers)", strategy, st.Name,
					q.get("name"), q.get("strategy"), q.get("number-of-servers"), name, want[0], want[1])
			}
		}
	}
}
