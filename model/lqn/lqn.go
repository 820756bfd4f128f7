// Package lqn writes the calibrated broker model as a layered queueing
// network in the LQN XML format (.lqnx) read by lqns (analytic) and lqsim
// (simulation).
//
// Of the three export formats this one comes closest to the §4 model's
// threads: every pipeline stage is a task of multiplicity 1 (a thread,
// serving its messages one at a time) and all of them run on one
// processor, cpu, scheduled processor-sharing with the calibration's
// quantum (lqsim simulates round robin with it) and as many CPUs as the
// broker had. Messages arrive at accept-msg at the sweep's rate (open
// arrivals, Poisson) and pass stage to stage by asynchronous calls, as a
// thread hands a message on without waiting; system is a task of
// infinite multiplicity on the same processor (the kernel's work,
// concurrent with the threads). Not expressible: GC pauses, the context
// switch cost c, demand distributions beyond the mean (host-demand-cvsq
// is left at its default), regular or bursty arrivals.
//
// Times are in seconds, rates per second (TimeUnit).
package lqn

import (
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/brokertrace/brokertrace/recfile"
)

// TimeUnit of demands and the quantum; arrival rates are per TimeUnit.
const TimeUnit = "s"

// ProcessorCPU is the name of the one processor.
const ProcessorCPU = "cpu"

// Options say what to write.
type Options struct {
	Rate float64 // msg/s arriving at accept-msg (and acks at accept-ack)
}

// The pipeline's order; a stage absent from the calibration (or without
// demand) is skipped; accept-ack is fed by arrivals of its own (the
// consumer's acks).
var pipeline = []string{"accept-msg", "process", "dispatch", "system"}

// Write writes the model.
func Write(w io.Writer, cal *recfile.Calibration, opt Options) error {
	if !(opt.Rate > 0) {
		return fmt.Errorf("lqn: arrival rate %v msg/s: give a positive rate", opt.Rate)
	}
	var chain []recfile.CalStage
	for _, name := range pipeline {
		i := slices.IndexFunc(cal.Stages, func(s recfile.CalStage) bool { return s.Name == name })
		if i >= 0 && cal.Stages[i].MeanNs > 0 {
			chain = append(chain, cal.Stages[i])
		}
	}
	if len(chain) == 0 || chain[0].Name == "system" {
		return fmt.Errorf("lqn: the calibration has none of the stages accept-msg, process, dispatch with a positive mean_ns")
	}
	p := processor{Name: ProcessorCPU, Scheduling: "ps"}
	if cal.CPUs > 1 {
		p.Multiplicity = cal.CPUs
	}
	if q, ok := cal.Param(recfile.CalQuantum); ok && q.Value > 0 {
		p.Quantum = num(q.Value / 1e9)
	}
	for i, s := range chain {
		t := stageTask(s, "fcfs")
		if s.Name == "system" {
			t.Scheduling = "inf"
		}
		if i == 0 {
			t.Entry.OpenArrivalRate = num(opt.Rate)
		}
		if i+1 < len(chain) {
			t.Entry.Activities[0].Calls = []call{{Dest: chain[i+1].Name, Mean: "1"}}
		}
		p.Tasks = append(p.Tasks, t)
	}
	if i := slices.IndexFunc(cal.Stages, func(s recfile.CalStage) bool { return s.Name == "accept-ack" }); i >= 0 && cal.Stages[i].MeanNs > 0 {
		t := stageTask(cal.Stages[i], "fcfs")
		t.Entry.OpenArrivalRate = num(opt.Rate)
		p.Tasks = append(p.Tasks, t)
	}
	m := lqnModel{Name: "broker", XSI: "http://www.w3.org/2001/XMLSchema-instance", Schema: "lqn.xsd",
		Description: fmt.Sprintf("ICPE'14 broker model from %s (broker %s, CPUs %d); times in seconds. Written by brokertrace export.",
			cal.Sweep, cal.Broker, cal.CPUs),
		Solver:     solverParams{ConvVal: "1e-05", ItLimit: 50, Underrelax: "0.9", PrintInt: 10},
		Processors: []processor{p}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(m); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// stageTask is a task with one entry named after the stage and one
// phase-1 activity holding its mean demand.
func stageTask(s recfile.CalStage, sched string) task {
	return task{Name: s.Name + "-thread", Scheduling: sched, Entry: entry{Name: s.Name, Type: "PH1PH2",
		Activities: []activity{{Name: s.Name + "_ph1", Phase: 1, Demand: num(s.MeanNs / 1e9)}}}}
}

type lqnModel struct {
	XMLName     xml.Name     `xml:"lqn-model"`
	Name        string       `xml:"name,attr"`
	Description string       `xml:"description,attr"`
	XSI         string       `xml:"xmlns:xsi,attr"`
	Schema      string       `xml:"xsi:noNamespaceSchemaLocation,attr"`
	Solver      solverParams `xml:"solver-params"`
	Processors  []processor  `xml:"processor"`
}

type solverParams struct {
	ConvVal    string `xml:"conv_val,attr"`
	ItLimit    int    `xml:"it_limit,attr"`
	Underrelax string `xml:"underrelax_coeff,attr"`
	PrintInt   int    `xml:"print_int,attr"`
}

type processor struct {
	Name         string `xml:"name,attr"`
	Scheduling   string `xml:"scheduling,attr"`
	Multiplicity int    `xml:"multiplicity,attr,omitempty"`
	Quantum      string `xml:"quantum,attr,omitempty"`
	Tasks        []task `xml:"task"`
}

type task struct {
	Name       string `xml:"name,attr"`
	Scheduling string `xml:"scheduling,attr"`
	Entry      entry  `xml:"entry"`
}

type entry struct {
	Name            string     `xml:"name,attr"`
	Type            string     `xml:"type,attr"`
	OpenArrivalRate string     `xml:"open-arrival-rate,attr,omitempty"`
	Activities      []activity `xml:"entry-phase-activities>activity"`
}

type activity struct {
	Name   string `xml:"name,attr"`
	Phase  int    `xml:"phase,attr"`
	Demand string `xml:"host-demand-mean,attr"`
	Calls  []call `xml:"asynch-call"`
}

type call struct {
	Dest string `xml:"dest,attr"`
	Mean string `xml:"calls-mean,attr"`
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
