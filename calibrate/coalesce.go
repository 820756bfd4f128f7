package calibrate

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/recfile"
)

// coalescing gathers, for every finished step of every pattern, how
// messages were packed into packets and skbs.
func (c *calibration) coalescing() error {
	for _, s := range c.all {
		co := recfile.CalCoalescing{Step: s.Index, Pattern: s.Pattern, RateAchieved: s.RateAchieved,
			PacketsPerMsgIn: s.PacketsPerMsgIn, PacketsPerMsgOut: s.PacketsPerMsgOut,
			BytesPerMsgIn: s.BytesPerMsgIn, BytesPerMsgOut: s.BytesPerMsgOut}
		if err := bytesPerPacket(s, &co); err != nil {
			return err
		}
		if err := segsPerSKB(s, &co); err != nil {
			return err
		}
		c.cal.Coalescing = append(c.cal.Coalescing, co)
	}
	return nil
}

// bytesPerPacket sums net.csv over the step's window.
func bytesPerPacket(s *step, co *recfile.CalCoalescing) error {
	rows, err := recfile.ReadTable[recfile.NetRow](filepath.Join(s.dir, recfile.NetFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("step %d: %w", s.Index, err)
	}
	var pi, po, bi, bo uint64
	for _, r := range rows {
		if r.TStart >= s.start && r.TEnd <= s.end {
			pi, po, bi, bo = pi+r.PktsIn, po+r.PktsOut, bi+r.BytesIn, bo+r.BytesOut
		}
	}
	if pi > 0 {
		co.BytesPerPacketIn = float64(bi) / float64(pi)
	}
	if po > 0 {
		co.BytesPerPacketOut = float64(bo) / float64(po)
	}
	return nil
}

// segsPerSKB reads gso.csv (the whole recording: it has no windows).
// The last bucket "64+" counts as 64.
func segsPerSKB(s *step, co *recfile.CalCoalescing) error {
	rows, err := recfile.ReadTable[recfile.GSORow](filepath.Join(s.dir, recfile.GSOFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("step %d: %w", s.Index, err)
	}
	skbs, segs, multi := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, r := range rows {
		n, err := strconv.Atoi(strings.TrimSuffix(r.Segs, "+"))
		if err != nil {
			return fmt.Errorf("step %d: %s: segs %q: %w", s.Index, recfile.GSOFile, r.Segs, err)
		}
		skbs[r.Direction] += float64(r.SKBs)
		segs[r.Direction] += float64(n) * float64(r.SKBs)
		if n > 1 {
			multi[r.Direction] += float64(r.SKBs)
		}
	}
	co.SegsPerSKB, co.MultiSegShare = map[string]float64{}, map[string]float64{}
	for d, n := range skbs {
		if n > 0 {
			co.SegsPerSKB[d], co.MultiSegShare[d] = segs[d]/n, multi[d]/n
		}
	}
	return nil
}
