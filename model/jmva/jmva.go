// Package jmva writes the calibrated broker model as an open queueing
// network for JMT's JMVA (.jmva), the exact mean-value solver, for quick
// what-ifs over the arrival rate.
//
// JMVA solves product-form networks only, so the model is the §4 pipeline
// reduced to mean demands: no GC pauses, no context-switch cost or quantum,
// no demand distributions, no bursts (arrivals are Poisson). Two layouts
// say where the stages run:
//
//   - LayoutStages: one station per stage (accept-msg, process, dispatch,
//     accept-ack, system) and one open class msg — each thread has a CPU of
//     its own, saturation at 1/max(demand);
//   - LayoutCPU: one station cpu shared by one open class per stage, each
//     arriving at the message rate with its stage's demand — the stages
//     share one CPU under processor sharing, saturation at 1/sum(demand),
//     and each class's residence time is its stage's share of the latency.
//
// Times are in seconds, rates in messages per second (TimeUnit).
package jmva

import (
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/recfile"
)

// TimeUnit of service times; arrival rates are per TimeUnit.
const TimeUnit = "s"

// Layouts.
const (
	LayoutStages = "stages"
	LayoutCPU    = "cpu"
)

// ClassMsg is the class of LayoutStages; StationCPU the station of LayoutCPU.
const (
	ClassMsg   = "msg"
	StationCPU = "cpu"
)

// Options say what to write.
type Options struct {
	Rate float64 // msg/s: the arrival rate of the model as written
	// WhatIf are arrival rates (msg/s) for a what-if analysis; those at or
	// beyond the model's saturation are left out (Write says which).
	WhatIf []float64
	// Layout: stages or cpu; "" chooses cpu for a broker confined to one
	// CPU, stages otherwise.
	Layout string
}

// Write writes the model and returns warnings (rates left out).
func Write(w io.Writer, cal *recfile.Calibration, opt Options) ([]string, error) {
	if opt.Layout == "" {
		opt.Layout = LayoutStages
		if cal.CPUs <= 1 {
			opt.Layout = LayoutCPU
		}
	}
	if opt.Layout != LayoutStages && opt.Layout != LayoutCPU {
		return nil, fmt.Errorf("jmva: layout %q: use stages or cpu", opt.Layout)
	}
	var stages []recfile.CalStage
	var warns []string
	for _, s := range cal.Stages {
		if s.MeanNs > 0 {
			stages = append(stages, s)
		} else {
			warns = append(warns, fmt.Sprintf("stage %s left out: no demand (%v ns)", s.Name, s.MeanNs))
		}
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("jmva: the calibration has no stages with a demand")
	}
	sat := Saturation(stages, opt.Layout)
	if !(opt.Rate > 0) || opt.Rate >= sat {
		return nil, fmt.Errorf("jmva: arrival rate %v msg/s: give a positive rate below the model's saturation, %.6g msg/s", opt.Rate, sat)
	}
	m := build(cal, stages, opt)
	var rates []float64
	for _, r := range opt.WhatIf {
		if r > 0 && r < sat {
			rates = append(rates, r)
		} else {
			warns = append(warns, fmt.Sprintf("what-if rate %v msg/s left out: the model saturates at %.6g msg/s", r, sat))
		}
	}
	m.whatIf(opt, rates)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return nil, err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	_, err := io.WriteString(w, "\n")
	return warns, err
}

// Saturation is the arrival rate (msg/s) at which the layout's busiest
// station reaches utilisation 1.
func Saturation(stages []recfile.CalStage, layout string) float64 {
	ns := make([]float64, len(stages))
	for i, s := range stages {
		ns[i] = s.MeanNs
	}
	if layout == LayoutCPU {
		sum := 0.0
		for _, v := range ns {
			sum += v
		}
		return 1e9 / sum
	}
	return 1e9 / slices.Max(ns)
}

func build(cal *recfile.Calibration, stages []recfile.CalStage, opt Options) *model {
	m := &model{XSI: "http://www.w3.org/2001/XMLSchema-instance", Schema: "JMTmodel.xsd"}
	m.Description.Text = fmt.Sprintf("ICPE'14 broker model from %s (broker %s, CPUs %d), layout %s; times in seconds, rates in msg/s. Written by brokertrace export.",
		cal.Sweep, cal.Broker, cal.CPUs, opt.Layout)
	p := &m.Parameters
	seconds := func(s recfile.CalStage) string { return num(s.MeanNs / 1e9) }
	if opt.Layout == LayoutStages {
		p.Classes.Open = []openClass{{Name: ClassMsg, Rate: num(opt.Rate)}}
		for _, s := range stages {
			p.Stations.LI = append(p.Stations.LI, station{Name: s.Name, Servers: 1,
				ServiceTimes: []perClass{{Class: ClassMsg, Value: seconds(s)}}, Visits: []perClass{{Class: ClassMsg, Value: "1"}}})
		}
	} else {
		cpu := station{Name: StationCPU, Servers: 1}
		for _, s := range stages {
			p.Classes.Open = append(p.Classes.Open, openClass{Name: s.Name, Rate: num(opt.Rate)})
			cpu.ServiceTimes = append(cpu.ServiceTimes, perClass{Class: s.Name, Value: seconds(s)})
			cpu.Visits = append(cpu.Visits, perClass{Class: s.Name, Value: "1"})
		}
		p.Stations.LI = []station{cpu}
	}
	p.Classes.Number = len(p.Classes.Open)
	p.Stations.Number = len(p.Stations.LI)
	p.Ref.Number = len(p.Classes.Open)
	for _, c := range p.Classes.Open {
		p.Ref.Classes = append(p.Ref.Classes, refClass{Name: c.Name, RefStation: "Arrival Process"})
	}
	m.AlgParams.AlgType = algType{Name: "MVA", Tolerance: "1.0E-7", MaxSamples: 10000}
	m.AlgParams.Compare.Value = false
	return m
}

// whatIf adds a what-if over the arrival rate: for LayoutStages the values
// are the msg class's rates; for LayoutCPU, where every class arrives at
// the message rate, they scale all classes at once (JMVA's "all classes
// proportionally"), as multiples of Rate.
func (m *model) whatIf(opt Options, rates []float64) {
	if len(rates) == 0 {
		return
	}
	vals := make([]string, len(rates))
	for i, r := range rates {
		if opt.Layout == LayoutStages {
			vals[i] = num(r)
		} else {
			vals[i] = num(r / opt.Rate)
		}
	}
	w := &whatIf{Type: "Arrival Rates", Values: strings.Join(vals, ";")}
	if opt.Layout == LayoutStages {
		w.Class = ClassMsg
	}
	m.WhatIf = w
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
