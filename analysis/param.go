package analysis

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// Run is one run of a parametrised experiment: its report and the value of
// the parameter varied across runs (message size in bytes, rate in msg/s,
// burst size in messages, ...).
type Run struct {
	Param  float64
	Label  string // e.g. the run's directory, written as the last column
	Report *Report
}

// Column is one aggregate of a run, as a column of a parametrised table.
type Column struct {
	Name  string // with its unit, e.g. latency_median_ns
	Value func(param float64, r *Report) float64
}

// DefaultColumns are the aggregates a parametrised table shows unless told
// otherwise: latency centre, spread and tail, throughput medians and
// humpiness.
func DefaultColumns() []Column {
	lat := func(name string, f func(s *Summary) float64) Column {
		return Column{Name: "latency_" + name + "_ns", Value: func(_ float64, r *Report) float64 { return f(&r.LatencyNs) }}
	}
	return []Column{
		{Name: "messages", Value: func(_ float64, r *Report) float64 { return float64(r.Messages) }},
		lat("mean", func(s *Summary) float64 { return s.Mean }),
		lat("median", func(s *Summary) float64 { return s.Median }),
		lat("robust_dev", func(s *Summary) float64 { return s.RobustDev }),
		lat("p99", func(s *Summary) float64 { return s.Percentile(99) }),
		lat("p99.99", func(s *Summary) float64 { return s.Percentile(99.99) }),
		lat("max", func(s *Summary) float64 { return s.Max }),
		{Name: "st_median_per_s", Value: func(_ float64, r *Report) float64 { return r.SenderThroughputPerSec.Median }},
		{Name: "rt_median_per_s", Value: func(_ float64, r *Report) float64 { return r.ReceiverThroughputPerSec.Median }},
		{Name: "modes", Value: func(_ float64, r *Report) float64 { return float64(r.LatencyModes.Count) }},
		{Name: "dip_p_value", Value: func(_ float64, r *Report) float64 { return r.LatencyDip.PValue }},
	}
}

// BytesPerSecColumns are the throughput medians in bytes per second, for
// when the parameter is the message size in bytes: the seed notes that
// messages per second then fall as the size grows while bytes per second
// rise towards the bandwidth, so both belong in the table.
func BytesPerSecColumns() []Column {
	return []Column{
		{Name: "st_median_bytes_per_s", Value: func(p float64, r *Report) float64 { return p * r.SenderThroughputPerSec.Median }},
		{Name: "rt_median_bytes_per_s", Value: func(p float64, r *Report) float64 { return p * r.ReceiverThroughputPerSec.Median }},
	}
}

// WriteParamDat writes one line per run, sorted by the parameter (runs with
// equal parameters in the given order): the parameter, each column, and the
// run's label as a quoted string. paramName names the first column with
// its unit, e.g. size_bytes.
func WriteParamDat(w io.Writer, paramName string, runs []Run, cols []Column) error {
	if err := checkName(paramName); err != nil {
		return err
	}
	names := []string{paramName}
	for _, c := range cols {
		if err := checkName(c.Name); err != nil {
			return err
		}
		names = append(names, c.Name)
	}
	sorted, err := sortRuns(runs)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	bw.WriteString("# ")
	for _, n := range names {
		bw.WriteString(n)
		bw.WriteByte(' ')
	}
	bw.WriteString("label\n")
	var b []byte
	for _, r := range sorted {
		b = appendNumber(b[:0], r.Param)
		for _, c := range cols {
			b = append(b, ' ')
			b = appendNumber(b, c.Value(r.Param, r.Report))
		}
		b = append(b, ' ')
		b = append(b, quoteLabel(r.Label)...)
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func sortRuns(runs []Run) ([]Run, error) {
	for i, r := range runs {
		if r.Report == nil {
			return nil, fmt.Errorf("run %d (%q) has no report: analyse it first", i, r.Label)
		}
		if math.IsNaN(r.Param) {
			return nil, fmt.Errorf("run %d (%q) has no parameter value (NaN): label each run with its parameter", i, r.Label)
		}
	}
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b Run) int { return cmp.Compare(a.Param, b.Param) })
	return sorted, nil
}

// ParamPoint aggregates one column over the repeated runs of one parameter
// value (MooBench repeats each configuration in fresh runs): Summary is of
// the runs' values, so its Mean and CI95 are those of the mean over runs.
type ParamPoint struct {
	Param   float64 `json:"param"`
	Runs    int     `json:"runs"`
	Summary Summary `json:"summary"`
}

// AggregateByParam groups runs by parameter value and aggregates column
// col over each group, in increasing parameter order.
func AggregateByParam(runs []Run, col Column) ([]ParamPoint, error) {
	if col.Value == nil {
		return nil, errors.New("column has no Value function")
	}
	sorted, err := sortRuns(runs)
	if err != nil {
		return nil, err
	}
	var pts []ParamPoint
	for i := 0; i < len(sorted); {
		j := i
		var vals []float64
		for ; j < len(sorted) && sorted[j].Param == sorted[i].Param; j++ {
			vals = append(vals, col.Value(sorted[j].Param, sorted[j].Report))
		}
		s, err := Summarize(vals, []float64{25, 75})
		if err != nil {
			return nil, err
		}
		pts = append(pts, ParamPoint{Param: sorted[i].Param, Runs: j - i, Summary: s})
		i = j
	}
	return pts, nil
}

// WriteParamPointsDat writes AggregateByParam's points: parameter, number
// of runs, mean, its 95% confidence interval, lower median, quartiles, min
// and max of valueName (with its unit) over the runs. gnuplot draws the
// interval with "using 1:3:4:5 with yerrorbars".
func WriteParamPointsDat(w io.Writer, paramName, valueName string, pts []ParamPoint) error {
	if err := checkName(paramName); err != nil {
		return err
	}
	if err := checkName(valueName); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# %s runs %[2]s_mean %[2]s_ci95_low %[2]s_ci95_high %[2]s_median %[2]s_p25 %[2]s_p75 %[2]s_min %[2]s_max\n", paramName, valueName)
	var b []byte
	for _, p := range pts {
		s := &p.Summary
		b = appendNumber(b[:0], p.Param)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(p.Runs), 10)
		for _, v := range []float64{s.Mean, s.CI95Low, s.CI95High, s.Median, s.Percentile(25), s.Percentile(75), s.Min, s.Max} {
			b = append(b, ' ')
			b = appendNumber(b, v)
		}
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}
