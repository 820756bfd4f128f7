package analysis

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/brokertrace/brokertrace/recfile"
)

// E2E is e2e.csv: one row per message sent, in the file's order (the order
// sent), warm-up rows included and flagged.
type E2E struct {
	IDs        []uint64
	IntendedNs []int64
	SendNs     []int64
	RecvNs     []int64 // 0: the message was never received (empty in the file)
	Warmup     []bool
}

// Len is the number of rows.
func (e *E2E) Len() int { return len(e.IDs) }

// E2ECounts says which rows of e2e.csv a series holds and why the others
// are left out.
type E2ECounts struct {
	Rows        int `json:"rows"`
	Warmup      int `json:"warmup"`       // warm-up rows, left out
	NotReceived int `json:"not_received"` // non-warm-up rows never received, left out
	Used        int `json:"used"`         // rows in the series
}

// ReadE2E reads an e2e.csv (recfile.E2ERow; an empty t_recv_ns is a
// message never received). Every time must be a positive ns count and
// warmup 0 or 1; anything else is an error naming file, line and column.
func ReadE2E(path string) (*E2E, error) {
	e := &E2E{}
	line := 1
	err := recfile.ScanTable(path, func(r *recfile.E2ERow) error {
		line++
		for _, t := range [...]struct {
			col string
			v   *int64 // nil: not received
		}{{"t_intended_ns", &r.TIntended}, {"t_send_ns", &r.TSend}, {"t_recv_ns", r.TRecv}} {
			if t.v != nil && (*t.v <= 0 || *t.v > 1<<62) {
				return e2eValueErr(path, line, t.col, strconv.FormatInt(*t.v, 10))
			}
		}
		recv := int64(0) // never received
		if r.TRecv != nil {
			recv = *r.TRecv
		}
		if r.Warmup > 1 {
			return e2eValueErr(path, line, "warmup", strconv.Itoa(int(r.Warmup)))
		}
		e.IDs = append(e.IDs, r.ID)
		e.IntendedNs = append(e.IntendedNs, r.TIntended)
		e.SendNs = append(e.SendNs, r.TSend)
		e.RecvNs = append(e.RecvNs, recv)
		e.Warmup = append(e.Warmup, r.Warmup == 1)
		return nil
	})
	if err == nil {
		return e, nil
	}
	var se *recfile.ScanError
	if !errors.As(err, &se) {
		return nil, err
	}
	switch {
	case se.Line == 1 && se.Err == recfile.ErrNoColumn:
		return nil, fmt.Errorf("%s: no column %q: is this an e2e.csv written by brokertrace load?", path, se.Column)
	case se.Line == 1:
		return nil, fmt.Errorf("%s: no header line: is this an e2e.csv written by brokertrace load?", path)
	case errors.Is(se.Err, csv.ErrFieldCount):
		return nil, fmt.Errorf("%s:%d: %d fields, the header has %d: the file is damaged or truncated", path, se.Line, se.Fields, se.Header)
	case se.Column != "":
		return nil, e2eValueErr(path, se.Line, se.Column, se.Value)
	}
	return nil, err
}

// e2eValueErr says what the column of a damaged row should hold.
func e2eValueErr(path string, line int, col, v string) error {
	want := "a time in ns (a positive integer)"
	switch col {
	case "id":
		want = "a decimal id"
	case "warmup":
		want = "0 or 1"
	}
	return fmt.Errorf("%s:%d: %s %q is not %s", path, line, col, v, want)
}

// Series returns the end-to-end series (O_n = t_send_ns, I_n = t_recv_ns)
// of the messages that are not warm-up and were received, in the order
// they were sent.
func (e *E2E) Series() (Series, E2ECounts) {
	c := E2ECounts{Rows: e.Len()}
	var s Series
	for i := range e.IDs {
		switch {
		case e.Warmup[i]:
			c.Warmup++
		case e.RecvNs[i] == 0:
			c.NotReceived++
		default:
			s.IDs = append(s.IDs, e.IDs[i])
			s.SentNs = append(s.SentNs, e.SendNs[i])
			s.RecvNs = append(s.RecvNs, e.RecvNs[i])
		}
	}
	c.Used = s.Len()
	sortByTime(s.IDs, s.SentNs, s.SentNs, s.RecvNs)
	return s, c
}

// Broker is messages.csv reduced to one row per message: its first copy
// to leave the broker. Rows are sorted by id.
type Broker struct {
	IDs   []uint64
	InNs  []int64 // t_in_ns: the broker read the message
	OutNs []int64 // t_out_ns: the broker wrote its first copy
	// Rows is the number of rows in the file; ExtraCopies the rows of
	// second and later copies (fan-out), left out.
	Rows        int `json:"rows"`
	ExtraCopies int `json:"extra_copies"`
}

// ReadBroker reads a messages.csv with recfile.ReadMessages and keeps the
// first copy of each message. Two first copies of one id mean the file is
// not what record writes, and are an error.
func ReadBroker(path string) (*Broker, error) {
	// Streamed: only the first copies' ids and times are kept (24 bytes a
	// message), whatever the file's size.
	b := &Broker{}
	type first struct {
		id      uint64
		in, out int64
	}
	var firsts []first
	err := recfile.ScanMessages(path, func(m *recfile.Message) error {
		b.Rows++
		if m.Copy == 1 {
			firsts = append(firsts, first{m.ID, m.TIn, m.TOut})
		} else {
			b.ExtraCopies++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(firsts, func(x, y first) int { return cmp.Compare(x.id, y.id) })
	b.IDs = make([]uint64, len(firsts))
	b.InNs = make([]int64, len(firsts))
	b.OutNs = make([]int64, len(firsts))
	for k, f := range firsts {
		if k > 0 && f.id == b.IDs[k-1] {
			return nil, fmt.Errorf("%s: id %d has two first copies (copy = 1): the file is not one recording; record again", path, f.id)
		}
		b.IDs[k], b.InNs[k], b.OutNs[k] = f.id, f.in, f.out
	}
	return b, nil
}

// Series returns the broker series (O_n = t_in_ns, I_n = t_out_ns) in the
// order the messages entered the broker. Without e2e.csv there is no
// warm-up flag: use Join to leave the warm-up out.
func (b *Broker) Series() Series {
	s := Series{IDs: slices.Clone(b.IDs), SentNs: slices.Clone(b.InNs), RecvNs: slices.Clone(b.OutNs)}
	sortByTime(s.IDs, s.SentNs, s.SentNs, s.RecvNs)
	return s
}

// JoinCounts account for every row of both files in a Joined.
type JoinCounts struct {
	E2E E2ECounts `json:"e2e"`
	// NotInBroker: messages used from e2e.csv that the broker recording has
	// no row for (sent before the recording started, or missed: see
	// meta.json's counters). They are left out.
	NotInBroker int `json:"not_in_broker"`
	// Broker rows (first copies) by what became of them.
	BrokerMessages    int `json:"broker_messages"`
	BrokerExtraCopies int `json:"broker_extra_copies"` // left out
	BrokerWarmup      int `json:"broker_warmup"`       // of warm-up messages, left out
	BrokerNotReceived int `json:"broker_not_received"` // forwarded, never received by the load's consumer, left out
	BrokerNotInE2E    int `json:"broker_not_in_e2e"`   // ids e2e.csv does not have (another producer's), left out
	Joined            int `json:"joined"`              // messages in the Joined series
}

// Joined holds the four times of each message seen both by the load
// generator and inside the broker, in the order sent. All four are
// CLOCK_MONOTONIC ns: joining them is valid only when the load generator
// ran on the broker's machine (brokertrace load and record on one host).
type Joined struct {
	IDs         []uint64
	SendNs      []int64
	BrokerInNs  []int64
	BrokerOutNs []int64
	RecvNs      []int64
	Counts      JoinCounts
}

// Join matches e2e.csv rows with the broker's rows by message id, leaving
// out warm-up rows and messages not received (each counted).
func Join(e *E2E, b *Broker) (*Joined, error) {
	if !slices.IsSorted(b.IDs) {
		return nil, errors.New("broker rows are not sorted by id: read them with ReadBroker")
	}
	j := &Joined{}
	c := &j.Counts
	c.E2E.Rows = e.Len()
	c.BrokerMessages = len(b.IDs)
	c.BrokerExtraCopies = b.ExtraCopies
	// e2e rows by id, to merge with the broker's.
	order := make([]int32, e.Len())
	for i := range order {
		order[i] = int32(i)
	}
	if !slices.IsSorted(e.IDs) {
		slices.SortStableFunc(order, func(x, y int32) int { return cmp.Compare(e.IDs[x], e.IDs[y]) })
	}
	match := make([]int32, e.Len()) // e2e row → broker row, −1 none
	bi := 0
	for k, i := range order {
		id := e.IDs[i]
		if k > 0 && id == e.IDs[order[k-1]] {
			return nil, fmt.Errorf("e2e.csv has id %d twice: the file is not one run", id)
		}
		for bi < len(b.IDs) && b.IDs[bi] < id {
			c.BrokerNotInE2E++
			bi++
		}
		match[i] = -1
		if bi < len(b.IDs) && b.IDs[bi] == id {
			match[i] = int32(bi)
			bi++
		}
	}
	c.BrokerNotInE2E += len(b.IDs) - bi

	for i := range e.IDs {
		m := match[i]
		switch {
		case e.Warmup[i]:
			c.E2E.Warmup++
			if m >= 0 {
				c.BrokerWarmup++
			}
		case e.RecvNs[i] == 0:
			c.E2E.NotReceived++
			if m >= 0 {
				c.BrokerNotReceived++
			}
		case m < 0:
			c.E2E.Used++
			c.NotInBroker++
		default:
			c.E2E.Used++
			j.IDs = append(j.IDs, e.IDs[i])
			j.SendNs = append(j.SendNs, e.SendNs[i])
			j.BrokerInNs = append(j.BrokerInNs, b.InNs[m])
			j.BrokerOutNs = append(j.BrokerOutNs, b.OutNs[m])
			j.RecvNs = append(j.RecvNs, e.RecvNs[i])
		}
	}
	c.Joined = len(j.IDs)
	sortByTime(j.IDs, j.SendNs, j.SendNs, j.BrokerInNs, j.BrokerOutNs, j.RecvNs)
	return j, nil
}

// EndToEnd is the series from the producer's send to the consumer's receipt.
func (j *Joined) EndToEnd() Series { return Series{IDs: j.IDs, SentNs: j.SendNs, RecvNs: j.RecvNs} }

// Broker is the series inside the broker, from its read to its write.
func (j *Joined) Broker() Series {
	return Series{IDs: j.IDs, SentNs: j.BrokerInNs, RecvNs: j.BrokerOutNs}
}

// ToBroker is the series from the producer's send to the broker's read
// (client library, kernel, network, and the wait for the broker to read).
func (j *Joined) ToBroker() Series { return Series{IDs: j.IDs, SentNs: j.SendNs, RecvNs: j.BrokerInNs} }

// FromBroker is the series from the broker's write to the consumer's
// receipt.
func (j *Joined) FromBroker() Series {
	return Series{IDs: j.IDs, SentNs: j.BrokerOutNs, RecvNs: j.RecvNs}
}

// sortByTime orders ids and the parallel columns by key (one of the
// columns), ties by id, unless they already are in that order (the usual
// case: files are written in send order), so that message n is the n-th
// sent.
func sortByTime(ids []uint64, key []int64, cols ...[]int64) {
	ordered := true
	for i := 1; i < len(key); i++ {
		if key[i] < key[i-1] || (key[i] == key[i-1] && ids[i] < ids[i-1]) {
			ordered = false
			break
		}
	}
	if ordered {
		return
	}
	perm := make([]int32, len(key))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortFunc(perm, func(a, b int32) int { return cmp.Or(cmp.Compare(key[a], key[b]), cmp.Compare(ids[a], ids[b])) })
	// key is one of cols: gather from clones.
	for _, c := range cols {
		src := slices.Clone(c)
		for i, p := range perm {
			c[i] = src[p]
		}
	}
	src := slices.Clone(ids)
	for i, p := range perm {
		ids[i] = src[p]
	}
}
