package record

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/probes/sockio"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// MatchBoth (--match both) matches by marker, as messages.csv says, and by
// frame with a second socket probe at the same time, and compares the
// two copy by copy: the check of matching by frame on traffic that also
// carries markers.
const MatchBoth sockio.Match = "both"

// frameCheck is --match both's second socket probe, a source beside the
// recording's: it matches the broker's copies by frame and hands them,
// with every marker row the recording writes (as an Annotator without
// columns), to a correlate.CrossCheck.
type frameCheck struct {
	opts  sockio.Options
	tr    *sockio.Tracer
	m     *correlate.Matcher
	check *correlate.CrossCheck
	rows  *recfile.Table[recfile.MatchCheckRow]
	// writeErr is the first error writing match_check.csv; the rows are
	// written under the check's lock.
	writeErr error
	stop     context.CancelFunc
	done     chan error
}

func newFrameCheck(opts sockio.Options) *frameCheck {
	opts.Match = sockio.MatchFrame
	return &frameCheck{opts: opts}
}

func (f *frameCheck) Name() string { return "match_check" }

func (f *frameCheck) Start(env *source.Env) error {
	var err error
	if f.rows, err = recfile.CreateTable[recfile.MatchCheckRow](env.Out, recfile.MatchCheckFile); err != nil {
		return err
	}
	if f.tr, err = sockio.Open(f.opts); err != nil {
		f.rows.Abort()
		return fmt.Errorf("the frame probe: %w", err)
	}
	f.check = correlate.NewCrossCheck(int64(env.MaxInBroker), f.write)
	f.m = correlate.New(f.check.Frame, env.MaxInBroker)
	f.m.Queue()
	ctx, stop := context.WithCancel(context.Background())
	f.stop, f.done = stop, make(chan error, 1)
	go func() {
		f.done <- f.tr.Read(ctx, func(io *events.IO) {
			f.check.FrameEvent(io)
			f.m.Add(io)
		})
	}()
	return nil
}

func (f *frameCheck) write(r *recfile.MatchCheckRow) {
	if f.writeErr == nil {
		f.writeErr = f.rows.Write(r)
	}
}

func (f *frameCheck) Sample(int64) {}

func (f *frameCheck) Watermark() int64 { return source.NoWatermark }

// Drain reads the frame probe's last events and matches its last writes.
func (f *frameCheck) Drain() error {
	f.stop()
	err := <-f.done
	f.m.Flush()
	return err
}

// Columns: none; the check only sees every row.
func (f *frameCheck) Columns() []string { return nil }

// Annotate takes a marker row as it is written.
func (f *frameCheck) Annotate(dst []byte, m *correlate.Message) []byte {
	f.check.Marker(m)
	return dst
}

func (f *frameCheck) Finish(*source.Timeline) (source.Result, error) {
	defer f.tr.Close()
	c := f.check.Finish()
	c.Frame = f.m.Finish()
	stats, statErr := f.tr.Stats()
	c.FrameProbe = stats
	res := source.Result{Files: []string{recfile.MatchCheckFile}, Meta: &c, Summary: checkSummary(&c)}
	if statErr != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the frame probe's counters could not be read: %v", statErr))
	}
	if n := c.Differs + c.MarkerOnly; n > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("matching by frame disagrees with matching by marker on %d of %d copies (%d matched otherwise, %d not found by frame): %s lists them",
			n, c.Copies, c.Differs, c.MarkerOnly, recfile.MatchCheckFile))
	}
	// What the frame probe lost or could not parse (TLS connections, bad
	// frames…), as a recording by frame says it.
	for _, w := range warnings(stats, c.Frame) {
		res.Warnings = append(res.Warnings, "the frame probe: "+strings.TrimPrefix(w, "--match frame: "))
	}
	if err := f.rows.Close(); err != nil || f.writeErr != nil {
		return res, fmt.Errorf("%s: %v", recfile.MatchCheckFile, cmp.Or(f.writeErr, err))
	}
	return res, nil
}

// checkSummary is the check's headline.
func checkSummary(c *recfile.MatchCheck) string {
	pct := 100.0
	if c.Copies > 0 {
		pct = 100 * float64(c.Matched) / float64(c.Copies)
	}
	return fmt.Sprintf("by frame, %d of %d copies matched alike (%.2f%%; %d with marker and payload end in different calls), %d matched otherwise, %d not found; %d copies without a marker; %d ambiguous, %d with no read; largest Δt in the same calls %s",
		c.Matched, c.Copies, pct, c.OtherCalls, c.Differs, c.MarkerOnly, c.FrameOnly, c.Frame.Ambiguous, c.Frame.OutWithoutIn, source.FormatNs(c.MaxDtNs))
}

// addFrameCheck adds the check's probe, as opts say with matching by
// frame, to the recording's sources.
func (r *recorder) addFrameCheck(opts sockio.Options) {
	fc := newFrameCheck(opts)
	r.cfg.Sources = append(slices.Clip(r.cfg.Sources), fc)
	r.annotators = append(r.annotators, annotator{Annotator: fc})
}
