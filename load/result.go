package load

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// Result is what a run did. Per-message slices are indexed by i, the
// message's position in the run; its id is Config.IDBase+i. All times are
// CLOCK_MONOTONIC ns.
type Result struct {
	Config Config
	Driver string // URL scheme of the driver used
	URL    string // broker URL with any password redacted

	StartNs   int64 // the run's time zero: intended time of message 0
	SendEndNs int64 // when the producer stopped
	EndNs     int64 // when draining stopped

	Intended []int64 // t_intended_ns
	Send     []int64 // t_send_ns: taken right before the client's publish call
	Recv     []int64 // t_recv_ns: taken on entry to the consumer's handler; 0 = never received

	// Subscribers has what each consumer received, in Config.SubURLs order
	// (one, on URL, without SubURLs). Recv and the counts from Received to
	// ClientDropped are Subscribers[0]'s.
	Subscribers []Subscriber

	Planned       int // messages the schedule called for
	Sent          int // messages handed to the client library without error
	Received      int // distinct sent messages the consumer got
	Missing       int // Sent - Received
	Duplicates    int // extra deliveries of already received messages
	Unexpected    int // marked messages on the subject with ids this run did not send
	Unmarked      int // messages on the subject without a marker at the start
	ClientDropped int // messages the client library discarded before the handler (part of Missing)
	Interrupted   bool
	Behind        bool // a timed run ended with the producer behind schedule
	// NamedByOrder: payload "same" over a protocol with no header for the
	// marker (Redis, MQTT 3.1.1): no message carried one, and each consumer
	// named the ones it got by their order of arrival — exact while the
	// broker keeps one publisher's order, as these do.
	NamedByOrder bool
	Error        string // why sending or draining ended early, if it did

	Summary Summary
}

// Subscriber is what one consumer of a run received; its fields mean what
// Result's of the same names do.
type Subscriber struct {
	URL  string  // where it subscribed, password redacted
	Recv []int64 // t_recv_ns by message index; 0 = never received

	Received      int
	Missing       int
	Duplicates    int
	Unexpected    int
	Unmarked      int
	ClientDropped int
}

// SentIDs returns the ids of the messages sent, in send order.
func (r *Result) SentIDs() []uint64 {
	ids := make([]uint64, r.Sent)
	for i := range ids {
		ids[i] = r.Config.IDBase + uint64(i)
	}
	return ids
}

// ReceivedIDs returns the ids of the sent messages the consumer received, in
// send order (each once, duplicates aside).
func (r *Result) ReceivedIDs() []uint64 {
	ids := make([]uint64, 0, r.Received)
	for i, t := range r.Recv {
		if t != 0 {
			ids = append(ids, r.Config.IDBase+uint64(i))
		}
	}
	return ids
}

// MissingIDs returns the ids of sent messages never received.
func (r *Result) MissingIDs() []uint64 {
	ids := make([]uint64, 0, r.Missing)
	for i, t := range r.Recv {
		if t == 0 {
			ids = append(ids, r.Config.IDBase+uint64(i))
		}
	}
	return ids
}

// IsWarmup reports whether message i was intended within the warm-up.
func (r *Result) IsWarmup(i int) bool {
	return r.Intended[i]-r.StartNs < r.Config.Warmup.Nanoseconds()
}

// Summary is the run's report: load.json, and the CLI's --json output.
type Summary = recfile.LoadSummary

// Stats are percentiles of a set of ns durations.
type Stats = recfile.LatencyStats

const histMax = int64(3600e9)

// hist wraps an HdrHistogram, keeping the exact minimum and maximum (the
// histogram only knows them to its precision).
type hist struct {
	h        *hdrhistogram.Histogram
	clamped  int64
	min, max int64
}

func newHist() *hist { return &hist{h: hdrhistogram.New(1, histMax, 3)} }

func (h *hist) record(v int64) {
	if h.h.TotalCount() == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	if v < 1 {
		v = 1 // CLOCK_MONOTONIC cannot go back; this is sub-ns rounding only
	}
	if v > histMax {
		v = histMax
		h.clamped++
	}
	_ = h.h.RecordValue(v)
}

func (h *hist) stats() Stats {
	if h.h.TotalCount() == 0 {
		return Stats{}
	}
	return Stats{
		Count:   h.h.TotalCount(),
		MinNs:   h.min,
		P50Ns:   h.h.ValueAtQuantile(50),
		P90Ns:   h.h.ValueAtQuantile(90),
		P99Ns:   h.h.ValueAtQuantile(99),
		P999Ns:  h.h.ValueAtQuantile(99.9),
		MaxNs:   h.max,
		MeanNs:  h.h.Mean(),
		Clamped: h.clamped,
	}
}

// summarize fills r.Summary from the per-message data.
func (r *Result) summarize() {
	s := Summary{
		Options:       r.Config,
		Driver:        r.Driver,
		URL:           r.URL,
		StartNs:       r.StartNs,
		SendEnd:       r.SendEndNs,
		EndNs:         r.EndNs,
		FirstID:       r.Config.IDBase,
		IDFormat:      "decimal here and in e2e.csv; in message bodies BTID + 16 lowercase hex digits",
		NamedByOrder:  r.NamedByOrder,
		Planned:       r.Planned,
		Sent:          r.Sent,
		Received:      r.Received,
		Missing:       r.Missing,
		Duplicates:    r.Duplicates,
		Unexpected:    r.Unexpected,
		Unmarked:      r.Unmarked,
		ClientDropped: r.ClientDropped,
		Interrupted:   r.Interrupted,
		Behind:        r.Behind,
		Error:         r.Error,
		AskedRate:     r.Config.Rate,
		Unsent:        max(r.Planned-r.Sent, 0),
		LateAfterNs:   r.Config.LateAfter.Nanoseconds(),
	}
	s.Options.URL = r.URL
	if r.Sent > 0 {
		s.LastID = r.Config.IDBase + uint64(r.Sent-1)
	}
	if r.Missing > 0 {
		s.MissingIDs = r.MissingIDs()
		if len(s.MissingIDs) > 100 {
			s.MissingIDs = s.MissingIDs[:100]
		}
	}

	late := newHist()
	lateAfter := r.Config.LateAfter.Nanoseconds()
	for i := 0; i < r.Sent; i++ {
		l := r.Send[i] - r.Intended[i]
		if l > lateAfter {
			s.LateSends++
		}
		if l > s.MaxLatenessNs {
			s.MaxLatenessNs = l
		}
		late.record(l)
		if r.IsWarmup(i) {
			s.Warmup++
		}
	}
	s.Lateness = late.stats()
	s.LatencyFromIntended, s.LatencyFromSend = r.latencies(r.Recv)
	if len(r.Config.SubURLs) > 0 {
		s.Options.SubURLs = make([]string, len(r.Subscribers))
		s.Subscribers = make([]recfile.SubscriberSummary, len(r.Subscribers))
		for k, sub := range r.Subscribers {
			s.Options.SubURLs[k] = sub.URL
			s.Subscribers[k] = r.subscriberSummary(sub)
		}
	}

	if r.Sent > 1 {
		sendSpan := float64(r.Send[r.Sent-1] - r.Send[0])
		if r.Config.Rate > 0 {
			intendedSpan := float64(r.Intended[r.Sent-1] - r.Intended[0])
			actualSpan := float64(r.Send[r.Sent-1] - r.Intended[0])
			if intendedSpan > 0 && actualSpan > 0 {
				s.AchievedRate = r.Config.Rate * intendedSpan / actualSpan
			} else if sendSpan > 0 {
				// One burst only: nothing to pace against.
				s.AchievedRate = float64(r.Sent-1) / sendSpan * 1e9
			}
		} else if sendSpan > 0 {
			s.AchievedRate = float64(r.Sent-1) / sendSpan * 1e9
		}
	}
	if r.Config.Rate > 0 && s.AchievedRate > 0 && s.AchievedRate < r.Config.Rate {
		s.ShortfallPct = 100 * (1 - s.AchievedRate/r.Config.Rate)
	}
	r.Summary = s
}

// latencies returns the end-to-end latencies of the non-warm-up messages
// with a receive time in recv, from their intended and from their actual
// send.
func (r *Result) latencies(recv []int64) (fromIntended, fromSend Stats) {
	fromInt, fromSnd := newHist(), newHist()
	for i, t := range recv[:r.Sent] {
		if t != 0 && !r.IsWarmup(i) {
			fromInt.record(t - r.Intended[i])
			fromSnd.record(t - r.Send[i])
		}
	}
	return fromInt.stats(), fromSnd.stats()
}

func (r *Result) subscriberSummary(sub Subscriber) recfile.SubscriberSummary {
	s := recfile.SubscriberSummary{
		URL:           sub.URL,
		Received:      sub.Received,
		Missing:       sub.Missing,
		Duplicates:    sub.Duplicates,
		Unexpected:    sub.Unexpected,
		Unmarked:      sub.Unmarked,
		ClientDropped: sub.ClientDropped,
	}
	s.LatencyFromIntended, s.LatencyFromSend = r.latencies(sub.Recv)
	return s
}

// WriteFiles writes dir/e2e.csv (one row per message sent), with subscriber
// URLs dir/subs.csv (one row per message and subscriber), and
// dir/load.json (the Summary, whose URLs have their passwords redacted).
// Each takes its name only when complete, so a reader never sees a partial
// file, even if the process dies while writing.
func (r *Result) WriteFiles(dir *outdir.Dir) error {
	if err := writeAtomic(dir, recfile.E2EFile, r.writeCSV); err != nil {
		return err
	}
	if len(r.Config.SubURLs) > 0 {
		if err := writeAtomic(dir, recfile.SubsFile, r.writeSubsCSV); err != nil {
			return err
		}
	}
	return writeAtomic(dir, recfile.LoadJSONFile, func(w *bufio.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r.Summary)
	})
}

// writeCSV writes e2e.csv: one recfile.E2ERow per message sent, in send
// order, streamed from the run's arrays.
func (r *Result) writeCSV(w *bufio.Writer) error {
	w.WriteString(strings.Join(recfile.Columns[recfile.E2ERow](), ",") + "\n")
	var line []byte
	for i := 0; i < r.Sent; i++ {
		row := recfile.E2ERow{ID: r.Config.IDBase + uint64(i), TIntended: r.Intended[i], TSend: r.Send[i]}
		if r.Recv[i] != 0 {
			row.TRecv = &r.Recv[i]
		}
		if r.IsWarmup(i) {
			row.Warmup = 1
		}
		line = recfile.AppendRow(line[:0], &row)
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return nil
}

// writeSubsCSV writes subs.csv: one recfile.SubRow per message sent and
// subscriber, in send order, subscribers in order within a message.
func (r *Result) writeSubsCSV(w *bufio.Writer) error {
	w.WriteString(strings.Join(recfile.Columns[recfile.SubRow](), ",") + "\n")
	var line []byte
	for i := 0; i < r.Sent; i++ {
		for k := range r.Subscribers {
			row := recfile.SubRow{ID: r.Config.IDBase + uint64(i), Sub: k + 1}
			if t := &r.Subscribers[k].Recv[i]; *t != 0 {
				row.TRecv = t
			}
			line = recfile.AppendRow(line[:0], &row)
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeAtomic(dir *outdir.Dir, name string, fill func(*bufio.Writer) error) error {
	f, err := dir.Create(name, outdir.FilePerm)
	if err != nil {
		return fmt.Errorf("writing %s: %w", dir.Join(name), err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	err = fill(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Abort()
		return fmt.Errorf("writing %s: %w", dir.Join(name), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", dir.Join(name), err)
	}
	return nil
}
