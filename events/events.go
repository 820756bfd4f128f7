// Package events defines what probes report to the rest of brokertrace.
// Probes turn kernel records into these types; correlation, outputs and
// analysis consume them and never see a probe's wire format.
package events

// Dir is the direction of socket I/O as seen from the traced process.
type Dir uint8

const (
	In  Dir = 0 // the process read the bytes from a socket
	Out Dir = 1 // the process wrote the bytes to a socket
)

func (d Dir) String() string {
	if d == Out {
		return "out"
	}
	return "in"
}

// Call is the system call that moved the bytes.
type Call uint8

// The values match enum bt_call in bpf/sockio.h.
const (
	CallOther Call = iota // not scannable: sendfile, splice, io_uring…
	CallRead
	CallWrite
	CallReadv
	CallWritev
	CallRecvfrom
	CallSendto
	CallRecvmsg
	CallSendmsg
	CallRecvmmsg
	CallSendmmsg
)

var callNames = [...]string{"other", "read", "write", "readv", "writev", "recvfrom", "sendto", "recvmsg", "sendmsg", "recvmmsg", "sendmmsg"}

func (c Call) String() string {
	if int(c) < len(callNames) {
		return callNames[c]
	}
	return "unknown"
}

// Conn identifies the TCP connection a call used.
type Conn struct {
	// Sock is an opaque identity of the kernel socket, unique among the
	// sockets alive at the same time. It is never written to outputs.
	Sock       uint64
	LocalPort  uint16
	RemotePort uint16
}

// Marker is one message marker found in a call's bytes.
type Marker struct {
	ID uint64
	// End is the offset just past the marker's last byte within the bytes
	// the call moved; a marker begun by an earlier call ends below 20.
	End uint32
	// Len is, with matching by frame, the payload's length (ID is then
	// the message's key, frame.Record.Key); 0 for a marker.
	Len uint32
}

// IO is one socket call of the target that carried markers.
type IO struct {
	// Time is CLOCK_MONOTONIC ns: for a read, when the probe's scan of its
	// bytes ended, just before the read returned to the process (the
	// process cannot see the bytes earlier); for a write, when its bytes
	// had been handed to the kernel, before the scan (which is no part of
	// the process's latency).
	Time int64
	// ScanNs is how long the probe scanned the call's bytes before this
	// event was sent: a read's bytes were handed over at Time − ScanNs, a
	// write's scan ended at Time + ScanNs. A call with more than 256
	// markers sends its first events before its scan ends. A call of at
	// most 1 KiB is timed from when its scan reached its first marker,
	// not from the hook (bpf/sockio.bpf.c, start_call).
	ScanNs int64
	PID    uint32
	TID    uint32
	Dir    Dir
	Call   Call
	Bytes  uint32 // bytes the call moved
	// SeqEnd is the TCP stream sequence after the call (copied_seq in,
	// write_seq out). A read that also consumed the peer's FIN is one past
	// its data, because the FIN takes a sequence number.
	SeqEnd uint32
	Conn   Conn
	// Truncated is set when part of the call's bytes was not scanned; the
	// probe's counters say how many.
	Truncated bool
	// Sched holds the target's scheduler clocks at the call, when the
	// scheduler probe shares them with the socket probe.
	Sched   SchedStamp
	Markers []Marker
}

// SchedStamp is the target's scheduler clocks read in the kernel at a
// socket call (bpf/schedclock.h): the switch-outs of its threads so far,
// and what it needs to give their on-CPU time at any instant of the call.
// Per message, switches and on-CPU time between its read and its write
// are the differences of the two calls' stamps.
type SchedStamp struct {
	OK bool // the clocks were read: the scheduler probe shares them
	// Raced: a CPU's clocks changed twice between the call's instant
	// and their read (switches during the scan of a write), so its
	// values at that instant were gone: Outs may be short of a switch
	// and OnCPU of a stint's part.
	Raced   bool
	Running uint32
	Outs    uint64
	Base    int64
}

// OnCPU is the target threads' on-CPU time up to t, an instant of the
// call that was stamped (no target switch on its CPU meanwhile); its
// origin is arbitrary, only differences mean something.
func (s SchedStamp) OnCPU(t int64) int64 { return s.Base + int64(s.Running)*t }
