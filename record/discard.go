package record

import (
	"fmt"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// rowWriter is where the rows of messages.csv go: the file, or nowhere.
type rowWriter interface {
	Write(m *recfile.Message, extra []byte) error
	Rows() int64
	Close() error
}

// discardRows counts rows and writes none: --discard measures the cost of
// collecting (probes, correlation, annotation) without the cost of
// formatting and writing the files, the MooBench split of C from W.
type discardRows struct{ n int64 }

func (d *discardRows) Write(*recfile.Message, []byte) error { d.n++; return nil }
func (d *discardRows) Rows() int64                          { return d.n }
func (d *discardRows) Close() error                         { return nil }

// createOutput opens the recording directory and creates messages.csv,
// failing before any probe is attached; under Discard it creates neither,
// and every file a source creates is /dev/null (outdir.Discard), so the
// sources run exactly as in a recording and nothing reaches a disk.
func (r *recorder) createOutput() error {
	if r.cfg.Discard {
		r.out, r.mw = outdir.Discard(), &discardRows{}
		r.meta.Discard = true
		r.meta.Files = []string{}
		return nil
	}
	out, err := outdir.Open(r.cfg.Out)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrOutput, err)
	}
	mw, err := recfile.CreateMessages(out, r.columns())
	if err != nil {
		out.Close()
		return fmt.Errorf("%w: %v (choose a writable directory with --out)", ErrOutput, err)
	}
	r.out, r.mw = out, mw
	return nil
}

// closeOutput closes the recording directory's descriptor.
func (r *recorder) closeOutput() {
	if r.out != nil {
		r.out.Close()
	}
}

// writeMeta writes meta.json last; under Discard the files the sources
// name are not listed, since none was kept.
func (r *recorder) writeMeta() error {
	if r.cfg.Discard {
		r.meta.Files = []string{}
		return nil
	}
	return recfile.WriteJSON(r.out, recfile.MetaFile, &r.meta, outdir.FilePerm)
}

// outDir is the recording directory, "" when nothing was written.
func (r *recorder) outDir() string {
	if r.cfg.Discard {
		return ""
	}
	return r.cfg.Out
}
