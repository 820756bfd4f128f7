package qpme

import (
	"bufio"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/recfile"
)

// QPME's Empirical distribution (SimQPN's EmpiricalCreator) draws u in
// [0, 1] from a histogram of equal-width bins read from pdf_filename —
// `;`-separated weights — interpolating linearly inside a bin, and returns
// offset + scale·u. A histogram of the demand samples over [min, max] is
// therefore written with offset = min; scale is then chosen so that the
// distribution's mean is exactly the calibration's mean_ns (scale would be
// max − min if the samples' mean were the mean of their histogram; the two
// differ by at most half a bin).

// demand returns the distribution attributes of a stage's demand.
func (b *builder) demand(st recfile.CalStage) ([]string, error) {
	mean := st.MeanNs / 1e9
	if b.opt.Demands == nil || st.DemandFile == "" {
		return []string{"distribution-function", "Exponential", "lambda", num(1 / mean)}, nil
	}
	h, err := readHistogram(b.opt.Demands, st.DemandFile, b.opt.Bins)
	if err != nil {
		return nil, fmt.Errorf("qpme: stage %s: %w", st.Name, err)
	}
	lo := h.min / 1e9
	eu := h.meanU()
	if h.n == 0 || !(mean > lo) || !(eu > 0) {
		return b.constant(mean), nil // no spread to shape: every demand is the mean
	}
	name := fmt.Sprintf("%s-%s-pdf.txt", b.opt.Prefix, st.Name)
	b.files = append(b.files, File{Name: name, Data: h.pdf()})
	return []string{"distribution-function", "Empirical", "pdf_filename", name,
		"offset", num(lo), "scale", num((mean - lo) / eu)}, nil
}

// constant is a deterministic delay. QPME's Deterministic distribution is
// read by SimQPN from an attribute ("c") the schema does not have, so a
// one-bin Empirical with scale 0 stands in: offset + 0·u = the value.
func (b *builder) constant(sec float64) []string {
	name := b.opt.Prefix + "-constant-pdf.txt"
	if !slices.ContainsFunc(b.files, func(f File) bool { return f.Name == name }) {
		b.files = append(b.files, File{Name: name, Data: []byte("1\n")})
	}
	return []string{"distribution-function", "Empirical", "pdf_filename", name, "offset", num(sec), "scale", "0"}
}

// interArrival is the arrivals place's service time: the time between two
// passes of the arrival token.
func (b *builder) interArrival() []string {
	switch b.opt.Pattern {
	case PatternPoisson:
		return []string{"distribution-function", "Exponential", "lambda", num(b.opt.Rate)}
	case PatternBursty:
		return b.constant(float64(b.opt.Burst) / b.opt.Rate)
	}
	return b.constant(1 / b.opt.Rate)
}

// histogram counts demand samples (ns) in equal bins over [min, max].
type histogram struct {
	min, max float64
	n        int
	counts   []int
}

// meanU is the mean of u under the histogram with linear interpolation:
// uniform within each bin.
func (h *histogram) meanU() float64 {
	if h.n == 0 {
		return 0
	}
	k := float64(len(h.counts))
	s := 0.0
	for i, c := range h.counts {
		s += float64(c) * (float64(i) + 0.5) / k
	}
	return s / float64(h.n)
}

// pdf is the bin weights, `;`-separated on one line, as SimQPN reads them.
func (h *histogram) pdf() []byte {
	parts := make([]string, len(h.counts))
	for i, c := range h.counts {
		parts[i] = num(float64(c) / float64(h.n))
	}
	return []byte(strings.Join(parts, ";") + "\n")
}

// readHistogram reads a demand file (demand_ns per line) twice — for the
// range, then for the counts — so memory stays bounded by the bins.
func readHistogram(fsys fs.FS, name string, bins int) (*histogram, error) {
	name = path.Clean(name)
	h := &histogram{min: math.Inf(1), max: math.Inf(-1)}
	err := eachSample(fsys, name, func(v float64) {
		h.min, h.max = min(h.min, v), max(h.max, v)
		h.n++
	})
	if err != nil || h.n == 0 {
		return h, err
	}
	if h.max == h.min {
		h.counts = []int{h.n}
		return h, nil
	}
	h.counts = make([]int, bins)
	width := (h.max - h.min) / float64(bins)
	err = eachSample(fsys, name, func(v float64) {
		h.counts[min(int((v-h.min)/width), bins-1)]++
	})
	return h, err
}

func eachSample(fsys fs.FS, name string, f func(float64)) error {
	file, err := fsys.Open(name)
	if err != nil {
		return fmt.Errorf("demand file: %w", err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Errorf("demand file %s line %d: %q is not a demand in ns", name, line, s)
		}
		f(v)
	}
	return sc.Err()
}
