package lqn

import (
	"bytes"
	"encoding/xml"
	"math"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/recfile"
)

// lqnDoc is the .lqnx as the test reads it, with its own struct.
type lqnDoc struct {
	XMLName    xml.Name `xml:"lqn-model"`
	Processors []struct {
		Name         string  `xml:"name,attr"`
		Scheduling   string  `xml:"scheduling,attr"`
		Quantum      float64 `xml:"quantum,attr"`
		Multiplicity int     `xml:"multiplicity,attr"`
		Tasks        []struct {
			Name       string `xml:"name,attr"`
			Scheduling string `xml:"scheduling,attr"`
			Entries    []struct {
				Name    string  `xml:"name,attr"`
				Arrival float64 `xml:"open-arrival-rate,attr"`
				Acts    []struct {
					Phase  int     `xml:"phase,attr"`
					Demand float64 `xml:"host-demand-mean,attr"`
					Calls  []struct {
						Dest string  `xml:"dest,attr"`
						Mean float64 `xml:"calls-mean,attr"`
					} `xml:"asynch-call"`
				} `xml:"entry-phase-activities>activity"`
			} `xml:"entry"`
		} `xml:"task"`
	} `xml:"processor"`
}

func TestWrite(t *testing.T) {
	cal := &recfile.Calibration{Sweep: "s", Broker: "activemq", CPUs: 2,
		Params: []recfile.CalParam{{Name: recfile.CalQuantum, Value: 3e6, Unit: "ns"}},
		Stages: []recfile.CalStage{
			{Name: "accept-msg", MeanNs: 12000}, {Name: "process", MeanNs: 8000}, {Name: "dispatch", MeanNs: 20000},
			{Name: "system", MeanNs: 10000}, {Name: "accept-ack", MeanNs: 4000},
		}}
	var buf bytes.Buffer
	if err := Write(&buf, cal, Options{Rate: 7000}); err != nil {
		t.Fatal(err)
	}
	var d lqnDoc
	if err := xml.Unmarshal(buf.Bytes(), &d); err != nil {
		t.Fatalf("the .lqnx does not parse: %v\n%s", err, buf.String())
	}
	if len(d.Processors) != 1 {
		t.Fatalf("%d processors, want 1", len(d.Processors))
	}
	p := d.Processors[0]
	if p.Scheduling != "ps" || math.Abs(p.Quantum-0.003) > 1e-15 || p.Multiplicity != 2 {
		t.Errorf("processor %s: scheduling %s, quantum %g s, multiplicity %d; want ps, 0.003 s (3 ms), 2", p.Name, p.Scheduling, p.Quantum, p.Multiplicity)
	}
	demand := map[string]float64{}
	arrival := map[string]float64{}
	next := map[string]string{}
	for _, tk := range p.Tasks {
		if len(tk.Entries) != 1 || len(tk.Entries[0].Acts) != 1 {
			t.Fatalf("task %s: want one entry with one activity", tk.Name)
		}
		e := tk.Entries[0]
		a := e.Acts[0]
		if a.Phase != 1 {
			t.Errorf("%s: phase %d", e.Name, a.Phase)
		}
		demand[e.Name], arrival[e.Name] = a.Demand, e.Arrival
		for _, c := range a.Calls {
			next[e.Name] = c.Dest
			if c.Mean != 1 {
				t.Errorf("%s → %s: %g calls per message, want 1", e.Name, c.Dest, c.Mean)
			}
		}
		if want := map[bool]string{true: "inf", false: "fcfs"}[e.Name == "system"]; tk.Scheduling != want {
			t.Errorf("task %s: scheduling %s, want %s", tk.Name, tk.Scheduling, want)
		}
	}
	for _, st := range cal.Stages {
		if got, want := demand[st.Name], st.MeanNs/1e9; math.Abs(got-want) > 1e-12*want {
			t.Errorf("%s: demand %g s, calibration %g s", st.Name, got, want)
		}
	}
	for from, to := range map[string]string{"accept-msg": "process", "process": "dispatch", "dispatch": "system"} {
		if next[from] != to {
			t.Errorf("%s calls %q, want %s", from, next[from], to)
		}
	}
	for _, dest := range next {
		if _, ok := demand[dest]; !ok {
			t.Errorf("a call to entry %q, which does not exist", dest)
		}
	}
	if arrival["accept-msg"] != 7000 || arrival["accept-ack"] != 7000 || arrival["process"] != 0 || len(next) != 3 {
		t.Errorf("open arrivals %v and calls %v: want 7000/s at accept-msg and accept-ack only, a chain of 3 calls", arrival, next)
	}
	if err := Write(&bytes.Buffer{}, &recfile.Calibration{Stages: cal.Stages[3:4]}, Options{Rate: 1}); err == nil || !strings.Contains(err.Error(), "dispatch") {
		t.Errorf("system stage only: error %v, want one naming the broker stages", err)
	}
}
