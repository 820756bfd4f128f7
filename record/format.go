package record

import "github.com/brokertrace/brokertrace/recfile"

// convertFormat writes the recording's tables in Config.Format once every
// one is complete and before meta.json, which then names the files that
// are there. Sources and messages.csv are always written as CSV first, so
// a crash during the conversion leaves complete CSV tables (see
// recfile.ConvertParquet) and no meta.json, as a crash before it would.
func (r *recorder) convertFormat() {
	if r.cfg.Discard || r.cfg.Format != recfile.FormatParquet {
		return
	}
	recfile.ConvertRecording(r.out, &r.meta)
}
