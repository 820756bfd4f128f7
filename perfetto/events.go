package perfetto

import (
	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// event is one TrackEvent: a slice's begin or end, or an instant.
type event struct {
	ts      int64
	track   uint64
	typ     uint64
	name    string
	flow    uint64 // flow_ids, 0: none
	endFlow uint64 // terminating_flow_ids, 0: none
}

// arg is one debug annotation: a string when s is set, else a number.
type arg struct {
	name string
	s    string
	u    uint64
}

// emit writes e as one packet, stamped with CLOCK_MONOTONIC.
func (w *Writer) emit(e event, args ...arg) {
	ev := appendVarint(w.ev[:0], fEventType, e.typ)
	ev = appendVarint(ev, fEventTrackUUID, e.track)
	if e.name != "" {
		ev = appendString(ev, fEventName, e.name)
	}
	if e.flow != 0 {
		ev = appendFixed64(ev, fFlowIDs, e.flow)
	}
	if e.endFlow != 0 {
		ev = appendFixed64(ev, fTerminatingFlowIDs, e.endFlow)
	}
	for _, a := range args {
		an := appendString(w.ann[:0], fAnnotationName, a.name)
		if a.s != "" {
			an = appendString(an, fAnnotationString, a.s)
		} else {
			an = appendVarint(an, fAnnotationUint, a.u)
		}
		w.ann = an
		ev = appendBytes(ev, fDebugAnnotations, an)
	}
	w.ev = ev
	p := appendVarint(w.pkt[:0], fTimestamp, uint64(e.ts))
	p = appendVarint(p, fTimestampClockID, clockMonotonic)
	p = appendVarint(p, fSequenceID, sequenceID)
	w.pkt = appendBytes(p, fTrackEvent, ev)
	w.writePacket(w.pkt)
}

// slice writes a slice [begin, end] on track, begun no earlier than *last
// (the end of the track's previous slice), and moves *last to its end.
// The arguments go on the begin event.
func (w *Writer) slice(track uint64, last *int64, begin, end int64, name string, args ...arg) {
	if begin < *last {
		begin = *last
		w.stats.Clamped++
	}
	end = max(end, begin)
	*last = end
	w.emit(event{ts: begin, track: track, typ: typeSliceBegin, name: name}, args...)
	w.emit(event{ts: end, track: track, typ: typeSliceEnd})
}

// reason names why a stint ended.
func reason(preempted bool) string {
	if preempted {
		return "preempted"
	}
	return "blocked"
}

// switchOut writes the stint sw ends on its thread's track: a "running"
// slice over the CPU time the kernel charged it, backdated from the
// switch-out as the scheduler source places it, or an instant when that
// is unknown.
func (w *Writer) switchOut(sw source.SchedSwitch) {
	t := w.track(sw.PrevTID)
	args := []arg{{name: "switch_out", s: reason(sw.Preempted)}, {name: "cpu", u: uint64(sw.CPU)}}
	if sw.Charged < 0 {
		w.stats.Unknown++
		w.emit(event{ts: sw.Time, track: ThreadUUID(sw.PrevTID), typ: typeInstant, name: "switch-out"}, args...)
		return
	}
	w.stats.Stints++
	w.slice(ThreadUUID(sw.PrevTID), &t.cpuEnd, sw.Time-sw.Charged, sw.Time, "running", args...)
}

// call writes a socket call that carried markers on its thread's socket
// track. The probe gives one time per call and how long it scanned the
// bytes: a read's slice is the scan that ended when the read returned, a
// write's the scan that began when its bytes were handed to the kernel.
func (w *Writer) call(e *events.IO) {
	t := w.track(e.TID)
	begin, end, name := e.Time-e.ScanNs, e.Time, "read"
	if e.Dir == events.Out {
		begin, end, name = e.Time, e.Time+e.ScanNs, "write"
	}
	args := []arg{
		{name: "call", s: e.Call.String()}, {name: "bytes", u: uint64(e.Bytes)}, {name: "markers", u: uint64(len(e.Markers))},
		{name: "lport", u: uint64(e.Conn.LocalPort)}, {name: "rport", u: uint64(e.Conn.RemotePort)},
	}
	if e.Truncated {
		args = append(args, arg{name: "truncated", s: "part of the bytes not scanned"})
	}
	w.stats.Calls++
	w.slice(SocketUUID(e.TID), &t.sockEnd, begin, end, name, args...)
}

// flow writes both ends of the flow of one row of messages.csv: an
// instant at t_in on the reading thread's socket track that starts it, and
// one at t_out on the writing thread's that ends it. Flow ids number the
// rows from 1, in messages.csv's order.
func (w *Writer) flow(m *recfile.Message) {
	w.stats.Flows++
	id := uint64(w.stats.Flows)
	w.track(m.InTID)
	w.track(m.OutTID)
	args := []arg{{name: "id", u: m.ID}, {name: "copy", u: uint64(m.Copy)}}
	w.emit(event{ts: m.TIn, track: SocketUUID(m.InTID), typ: typeInstant, name: "message in", flow: id}, args...)
	args = append(args, arg{name: "latency_ns", u: uint64(m.Latency)})
	w.emit(event{ts: m.TOut, track: SocketUUID(m.OutTID), typ: typeInstant, name: "message out", endFlow: id}, args...)
}
