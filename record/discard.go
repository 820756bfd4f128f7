package record

import (
	"fmt"
	"os"
	"path/filepath"

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

// sourceFiles are the files the sources may write into a recording
// directory.
var sourceFiles = []string{
	recfile.SchedFile, recfile.ThreadsFile, recfile.CPUFile, recfile.CPUPerMsgFile,
	recfile.CPUCoresFile, recfile.PacketsFile, recfile.NetFile, recfile.GSOFile,
}

// discardDir makes the directory the sources are given under --discard.
// Sources write their files themselves, by name, into Env.Out; here every
// such name is a link to /dev/null, so they run exactly as in a recording
// and nothing reaches a disk. The caller removes the directory at the end,
// and a test checks that no source wrote a file outside these links.
func discardDir() (string, error) {
	dir, err := os.MkdirTemp("", "brokertrace-discard-")
	if err != nil {
		return "", err
	}
	for _, name := range sourceFiles {
		if err := os.Symlink(os.DevNull, filepath.Join(dir, name)); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// createOutput creates the recording directory and messages.csv, failing
// before any probe is attached; under Discard it creates neither.
func (r *recorder) createOutput() error {
	if r.cfg.Discard {
		dir, err := discardDir()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrOutput, err)
		}
		r.dir, r.mw = dir, &discardRows{}
		r.meta.Discard = true
		r.meta.Files = []string{}
		return nil
	}
	if err := os.MkdirAll(r.cfg.Out, 0o755); err != nil {
		return fmt.Errorf("%w: %v (choose a writable directory with --out)", ErrOutput, err)
	}
	mw, err := recfile.CreateMessages(r.cfg.Out, r.columns())
	if err != nil {
		return fmt.Errorf("%w: %v (choose a writable directory with --out)", ErrOutput, err)
	}
	r.dir, r.mw = r.cfg.Out, mw
	return nil
}

// removeScratch removes Discard's scratch directory.
func (r *recorder) removeScratch() {
	if r.cfg.Discard && r.dir != "" {
		os.RemoveAll(r.dir)
	}
}

// writeMeta writes meta.json last; under Discard the files the sources
// name are not listed, since none was kept.
func (r *recorder) writeMeta() error {
	if r.cfg.Discard {
		r.meta.Files = []string{}
		return nil
	}
	return recfile.WriteJSON(r.cfg.Out, recfile.MetaFile, &r.meta)
}

// outDir is the recording directory, "" when nothing was written.
func (r *recorder) outDir() string {
	if r.cfg.Discard {
		return ""
	}
	return r.cfg.Out
}
