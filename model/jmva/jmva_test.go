package jmva

import (
	"bytes"
	"encoding/xml"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/recfile"
)

// doc is the JMVA document as the test reads it: its own struct, written
// from JMVA files, not the writer's.
type doc struct {
	XMLName xml.Name `xml:"model"`
	Classes struct {
		Number int `xml:"number,attr"`
		Open   []struct {
			Name string  `xml:"name,attr"`
			Rate float64 `xml:"rate,attr"`
		} `xml:"openclass"`
		Closed []struct{} `xml:"closedclass"`
	} `xml:"parameters>classes"`
	Stations struct {
		Number int `xml:"number,attr"`
		LI     []struct {
			Name    string `xml:"name,attr"`
			Servers int    `xml:"servers,attr"`
			ST      []struct {
				Class string  `xml:"customerclass,attr"`
				V     float64 `xml:",chardata"`
			} `xml:"servicetimes>servicetime"`
			Visits []struct {
				Class string  `xml:"customerclass,attr"`
				V     float64 `xml:",chardata"`
			} `xml:"visits>visit"`
		} `xml:"listation"`
	} `xml:"parameters>stations"`
	Ref []struct {
		Name    string `xml:"name,attr"`
		Station string `xml:"refStation,attr"`
	} `xml:"parameters>ReferenceStation>Class"`
	Alg struct {
		Name string `xml:"name,attr"`
	} `xml:"algParams>algType"`
	WhatIf *struct {
		Class  string `xml:"className,attr"`
		Type   string `xml:"type,attr"`
		Values string `xml:"values,attr"`
	} `xml:"whatIf"`
}

// fixture: four stages whose demands sum to 50 µs, the paper's
// demand_per_msg for a peak of 20 000 msg/s.
func fixture(cpus int) *recfile.Calibration {
	return &recfile.Calibration{Sweep: "s", Broker: "activemq", CPUs: cpus,
		Params: []recfile.CalParam{{Name: recfile.CalPeakThroughput, Value: 20000, Unit: "msg/s"}},
		Stages: []recfile.CalStage{
			{Name: "accept-msg", MeanNs: 12000}, {Name: "process", MeanNs: 8000},
			{Name: "dispatch", MeanNs: 20000}, {Name: "system", MeanNs: 10000},
		}}
}

func write(t *testing.T, cal *recfile.Calibration, opt Options) (*doc, []string) {
	t.Helper()
	var buf bytes.Buffer
	warns, err := Write(&buf, cal, opt)
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	if err := xml.Unmarshal(buf.Bytes(), &d); err != nil {
		t.Fatalf("the .jmva does not parse: %v\n%s", err, buf.String())
	}
	// What JMVA needs of every file: counts that match, a service time and
	// a visit count for every class at every station, a reference station
	// per class, an algorithm.
	if d.Classes.Number != len(d.Classes.Open)+len(d.Classes.Closed) || d.Stations.Number != len(d.Stations.LI) {
		t.Errorf("classes number=%d for %d classes, stations number=%d for %d", d.Classes.Number, len(d.Classes.Open),
			d.Stations.Number, len(d.Stations.LI))
	}
	for _, s := range d.Stations.LI {
		if len(s.ST) != len(d.Classes.Open) || len(s.Visits) != len(d.Classes.Open) || s.Servers != 1 {
			t.Errorf("station %s: %d service times, %d visits, %d servers for %d classes", s.Name, len(s.ST), len(s.Visits), s.Servers, len(d.Classes.Open))
		}
	}
	if len(d.Ref) != len(d.Classes.Open) || d.Alg.Name != "MVA" {
		t.Errorf("%d reference stations for %d classes; algorithm %q", len(d.Ref), len(d.Classes.Open), d.Alg.Name)
	}
	return &d, warns
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Abs(b) }

func TestStagesLayout(t *testing.T) {
	cal := fixture(4)
	d, warns := write(t, cal, Options{Rate: 30000, WhatIf: []float64{10000, 40000, 50000, 60000}})
	if len(d.Classes.Open) != 1 || d.Classes.Open[0].Name != ClassMsg || d.Classes.Open[0].Rate != 30000 {
		t.Fatalf("classes %+v, want one open class msg at 30000 msg/s", d.Classes.Open)
	}
	if len(d.Stations.LI) != len(cal.Stages) {
		t.Fatalf("%d stations for %d stages", len(d.Stations.LI), len(cal.Stages))
	}
	for i, s := range d.Stations.LI {
		st := cal.Stages[i]
		if s.Name != st.Name || !near(s.ST[0].V, st.MeanNs/1e9) || s.Visits[0].V != 1 {
			t.Errorf("station %s: service time %g s, visits %g; want %s with %g s (calibration's mean), 1 visit",
				s.Name, s.ST[0].V, s.Visits[0].V, st.Name, st.MeanNs/1e9)
		}
	}
	// Each thread on its own CPU: dispatch (20 µs) saturates at 50 000 msg/s.
	if d.WhatIf == nil || d.WhatIf.Class != ClassMsg || d.WhatIf.Type != "Arrival Rates" || d.WhatIf.Values != "10000;40000" {
		t.Errorf("what-if %+v, want msg arrival rates 10000;40000", d.WhatIf)
	}
	if len(warns) != 2 || !strings.Contains(warns[0], "50000") {
		t.Errorf("warnings %q: want the two rates at or past 50000 msg/s left out", warns)
	}
}

func TestCPULayout(t *testing.T) {
	cal := fixture(1)
	d, warns := write(t, cal, Options{Rate: 10000, WhatIf: []float64{5000, 15000, 25000}})
	if len(d.Stations.LI) != 1 || d.Stations.LI[0].Name != StationCPU {
		t.Fatalf("stations %+v, want the one cpu station a 1-CPU broker gets by default", d.Stations.LI)
	}
	var names []string
	sum := 0.0
	for i, c := range d.Classes.Open {
		st := cal.Stages[i]
		names = append(names, c.Name)
		cs := d.Stations.LI[0].ST[i]
		if c.Name != st.Name || c.Rate != 10000 || cs.Class != st.Name || !near(cs.V, st.MeanNs/1e9) {
			t.Errorf("class %s at %g msg/s with %g s at the cpu; want %s at 10000 msg/s with %g s", c.Name, c.Rate, cs.V, st.Name, st.MeanNs/1e9)
		}
		sum += cs.V
	}
	if !slices.Equal(names, []string{"accept-msg", "process", "dispatch", "system"}) {
		t.Errorf("classes %v", names)
	}
	// The stages share the CPU: the file saturates at the calibration's
	// peak throughput, 1/(50 µs) = 20 000 msg/s.
	peak, _ := cal.Param(recfile.CalPeakThroughput)
	if !near(1/sum, peak.Value) {
		t.Errorf("the file's total demand %g s saturates at %g msg/s, the calibration's peak is %g", sum, 1/sum, peak.Value)
	}
	// What-if over all classes as multiples of the written rate.
	if d.WhatIf == nil || d.WhatIf.Class != "" || d.WhatIf.Values != "0.5;1.5" {
		t.Errorf("what-if %+v, want all classes scaled by 0.5;1.5", d.WhatIf)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "25000") {
		t.Errorf("warnings %q: want 25000 msg/s left out", warns)
	}
	if v, err := strconv.ParseFloat(strings.Split(d.WhatIf.Values, ";")[1], 64); err != nil || !near(v*10000, 15000) {
		t.Errorf("what-if multiple %v does not give 15000 msg/s", v)
	}
}

func TestWriteErrors(t *testing.T) {
	for _, tc := range []struct {
		what string
		cal  *recfile.Calibration
		opt  Options
		want string
	}{
		{"saturated", fixture(1), Options{Rate: 20000}, "saturation, 20000"},
		{"no rate", fixture(1), Options{}, "positive rate"},
		{"bad layout", fixture(1), Options{Rate: 1, Layout: "mesh"}, "layout"},
		{"no stages", &recfile.Calibration{Stages: []recfile.CalStage{{Name: "system"}}}, Options{Rate: 1}, "no stages"},
	} {
		if _, err := Write(&bytes.Buffer{}, tc.cal, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.what, err, tc.want)
		}
	}
}

func TestZeroStageLeftOut(t *testing.T) {
	cal := fixture(1)
	cal.Stages[1].MeanNs = 0 // process: no between thread
	d, warns := write(t, cal, Options{Rate: 1000})
	if len(d.Classes.Open) != 3 || len(warns) != 1 || !strings.Contains(warns[0], "process") {
		t.Errorf("%d classes, warnings %q: want process left out with a warning", len(d.Classes.Open), warns)
	}
}
