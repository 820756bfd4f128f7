package report

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/analysis"
	"github.com/brokertrace/brokertrace/recfile"
)

// ErrInput marks arguments that are not recordings at all; the CLI exits
// with its usage code. Damaged files are other errors, naming file and line.
var ErrInput = errors.New("not a brokertrace recording")

// expected is what a DIR must hold, for the error when it holds neither.
const expected = "a record directory (messages.csv and meta.json, from brokertrace record --out DIR) or a load directory (e2e.csv and load.json, from brokertrace load --out DIR)"

// recordData is one record directory, read.
type recordData struct {
	dir    string
	meta   recfile.Meta
	broker *analysis.Broker
	extras *msgExtras
	// The sources' files; nil when absent.
	sched     *rowsFile[recfile.SchedRow]
	threads   *rowsFile[recfile.ThreadRow]
	cpu       *rowsFile[recfile.CPURow]
	cpuPerMsg *rowsFile[recfile.CPUPerMsgRow]
	packets   *rowsFile[recfile.PacketRow]
	net       *rowsFile[recfile.NetRow]
	gso       *rowsFile[recfile.GSORow]
	// missing says, for each optional file or column not there, why.
	missing []string
}

// msgExtras are the per-message columns other sources add to messages.csv,
// for the first copy of each message, sorted by id. A column the file does
// not have is nil; an empty field is NaN.
type msgExtras struct {
	ids                []uint64
	ctxsw, oncpu, wait []float64
}

// lookup returns the row of id, or −1.
func (x *msgExtras) lookup(id uint64) int {
	if x == nil {
		return -1
	}
	i, ok := slices.BinarySearch(x.ids, id)
	if !ok {
		return -1
	}
	return i
}

// loadData is one load directory, read.
type loadData struct {
	dir string
	e2e *analysis.E2E
	sum *recfile.LoadSummary // nil without load.json
	// host is load.json's "host.hostname" when a future version records
	// it; brokertrace load today does not.
	host           string
	startNs, endNs int64 // span of the run on CLOCK_MONOTONIC
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readDir reads what dir holds: a recording, a load run, or both.
func readDir(dir string) (*recordData, *loadData, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v; give %s", ErrInput, dir, unwrapPathErr(err), expected)
	}
	if !fi.IsDir() {
		return nil, nil, fmt.Errorf("%w: %s is a file, not a directory; give %s", ErrInput, dir, expected)
	}
	hasMsgs := recfile.TableExists(filepath.Join(dir, recfile.MessagesFile))
	hasMeta := exists(filepath.Join(dir, recfile.MetaFile))
	hasE2E := exists(filepath.Join(dir, recfile.E2EFile))
	switch {
	case hasMsgs && !hasMeta:
		return nil, nil, fmt.Errorf("%w: %s has messages.csv but no meta.json: the recording is incomplete (copy the whole directory)", ErrInput, dir)
	case hasMeta && !hasMsgs:
		return nil, nil, fmt.Errorf("%w: %s has meta.json but no messages.csv: the recording is incomplete (copy the whole directory)", ErrInput, dir)
	case !hasMsgs && !hasE2E:
		var names []string
		if ents, err := os.ReadDir(dir); err == nil {
			for _, e := range ents {
				names = append(names, e.Name())
				if len(names) == 8 {
					names = append(names, "…")
					break
				}
			}
		}
		has := "nothing"
		if len(names) > 0 {
			has = strings.Join(names, ", ")
		}
		return nil, nil, fmt.Errorf("%w: %s holds %s; give %s", ErrInput, dir, has, expected)
	}
	var rec *recordData
	var ld *loadData
	if hasMsgs {
		if rec, err = readRecord(dir); err != nil {
			return nil, nil, err
		}
	}
	if hasE2E {
		if ld, err = readLoad(dir); err != nil {
			return nil, nil, err
		}
	}
	return rec, ld, nil
}

func readRecord(dir string) (*recordData, error) {
	r := &recordData{dir: dir}
	metaPath := filepath.Join(dir, recfile.MetaFile)
	if err := recfile.ReadJSON(dir, recfile.MetaFile, &r.meta); err != nil {
		return nil, jsonErr(metaPath, err)
	}
	var err error
	if r.broker, err = analysis.ReadBroker(filepath.Join(dir, recfile.MessagesFile)); err != nil {
		return nil, err
	}
	if r.extras, err = readExtras(filepath.Join(dir, recfile.MessagesFile)); err != nil {
		return nil, err
	}
	if r.extras.ctxsw == nil {
		r.missing = append(r.missing, "messages.csv has no ctxsw/oncpu_ns columns: "+r.sourceWhy("sched", "--sched"))
	}
	if r.extras.wait == nil {
		r.missing = append(r.missing, "messages.csv has no sockq_wait_ns column: "+r.sourceWhy("sockq", "--sockq"))
	}
	for _, o := range r.sourceFiles() {
		path := filepath.Join(dir, o.file)
		if !recfile.TableExists(path) {
			r.missing = append(r.missing, o.file+": "+r.sourceWhy(o.source, o.flag))
			continue
		}
		if err := o.read(path); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// sourceFile is a recording's file beyond messages.csv and meta.json, with
// the source (its key in meta.json) and flag that write it.
type sourceFile struct {
	file, source, flag string
	read               func(path string) error // into its field of recordData
}

// sourceFiles are the files the sources write, in the order the report
// says which are missing.
func (r *recordData) sourceFiles() []sourceFile {
	return []sourceFile{
		{recfile.SchedFile, "sched", "--sched", readInto(&r.sched)},
		{recfile.ThreadsFile, "sched", "--sched", readInto(&r.threads)},
		{recfile.CPUFile, "cpu", "--cpu", readInto(&r.cpu)},
		{recfile.CPUPerMsgFile, "cpu", "--cpu", readInto(&r.cpuPerMsg)},
		{recfile.PacketsFile, "capture", "--capture", readInto(&r.packets)},
		{recfile.NetFile, "capture", "--capture", readInto(&r.net)},
		{recfile.GSOFile, "netstack", "--gso", readInto(&r.gso)},
	}
}

func readInto[T any](dst **rowsFile[T]) func(path string) error {
	return func(path string) (err error) {
		*dst, err = readRows[T](path)
		return err
	}
}

// sourceWhy says why a source's data is absent: what meta.json says of it,
// or that it was not asked for.
func (r *recordData) sourceWhy(source, flag string) string {
	if s, ok := r.meta.Sources[source]; ok && s.Status != "ok" {
		why := s.Error
		if why == "" {
			why = "no reason given"
		}
		return fmt.Sprintf("the %s source was %s (%s)", source, s.Status, why)
	}
	if _, ok := r.meta.Sources[source]; ok {
		return fmt.Sprintf("the %s source ran but did not write it (see meta.json)", source)
	}
	return fmt.Sprintf("not recorded (record with %s, on by default in this version)", flag)
}

// readExtras reads the sources' per-message columns of messages.csv for
// the first copies.
func readExtras(path string) (*msgExtras, error) {
	x := &msgExtras{}
	idx := map[string]int{}
	var dst []*[]float64
	var names []string
	type row struct {
		id uint64
		v  [3]float64
	}
	var rows []row
	err := scanCSV(path, func(hdr []string) error {
		for i, h := range hdr {
			idx[h] = i
		}
		for _, c := range []struct {
			name string
			d    *[]float64
		}{{recfile.CtxswColumn, &x.ctxsw}, {recfile.OnCPUColumn, &x.oncpu}, {recfile.SockqWaitColumn, &x.wait}} {
			if _, ok := idx[c.name]; ok {
				dst = append(dst, c.d)
				names = append(names, c.name)
			}
		}
		return nil
	}, func(line int, rec []string) error {
		if len(dst) == 0 {
			return nil
		}
		if rec[idx["copy"]] != "1" {
			return nil
		}
		id, err := strconv.ParseUint(rec[idx["id"]], 10, 64)
		if err != nil {
			return fmt.Errorf("%s:%d: column id: %q is not a decimal id: the file is damaged", path, line, rec[idx["id"]])
		}
		r := row{id: id}
		for k, n := range names {
			v, err := parseField(rec[idx[n]])
			if err != nil {
				return fmt.Errorf("%s:%d: column %s: %q is not a number: the file is damaged", path, line, n, rec[idx[n]])
			}
			r.v[k] = v
		}
		rows = append(rows, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(dst) == 0 {
		return x, nil
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(a.id, b.id) })
	x.ids = make([]uint64, len(rows))
	for _, d := range dst {
		*d = make([]float64, len(rows))
	}
	for i, r := range rows {
		x.ids[i] = r.id
		for k, d := range dst {
			(*d)[i] = r.v[k]
		}
	}
	return x, nil
}

func readLoad(dir string) (*loadData, error) {
	l := &loadData{dir: dir}
	var err error
	if l.e2e, err = analysis.ReadE2E(filepath.Join(dir, recfile.E2EFile)); err != nil {
		return nil, err
	}
	jp := filepath.Join(dir, recfile.LoadJSONFile)
	if exists(jp) {
		data, err := recfile.ReadFile(jp)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", jp, unwrapPathErr(err))
		}
		var s recfile.LoadSummary
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, jsonErr(jp, err)
		}
		l.sum = &s
		var h struct {
			Host struct {
				Hostname string `json:"hostname"`
			} `json:"host"`
		}
		if json.Unmarshal(data, &h) == nil {
			l.host = h.Host.Hostname
		}
		l.startNs, l.endNs = s.StartNs, s.EndNs
	}
	if l.startNs == 0 && l.e2e.Len() > 0 {
		l.startNs, l.endNs = math.MaxInt64, 0
		for i := range l.e2e.IDs {
			l.startNs = min(l.startNs, l.e2e.SendNs[i])
			l.endNs = max(l.endNs, l.e2e.SendNs[i], l.e2e.RecvNs[i])
		}
	}
	return l, nil
}

// jsonErr names the file and, for a syntax error, the line.
func jsonErr(path string, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		data, _ := os.ReadFile(path)
		line := 1 + strings.Count(string(data[:min(int(se.Offset), len(data))]), "\n")
		return fmt.Errorf("%s:%d: %v: the file is damaged", path, line, se)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%s: field %s: %v: the file is damaged or not what brokertrace writes", path, te.Field, te)
	}
	return fmt.Errorf("%s: %w", path, unwrapPathErr(err))
}
