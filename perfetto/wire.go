package perfetto

import "google.golang.org/protobuf/encoding/protowire"

// Field numbers of Perfetto's trace protos (protos/perfetto/trace/ in
// github.com/google/perfetto): only those written here. Protobuf field
// numbers never change once published.
const (
	fTracePacket = 1 // Trace.packet

	// TracePacket.
	fClockSnapshot    = 6
	fTimestamp        = 8
	fSequenceID       = 10 // trusted_packet_sequence_id
	fTrackEvent       = 11
	fSequenceFlags    = 13
	fTimestampClockID = 58
	fTrackDescriptor  = 60

	// ClockSnapshot and ClockSnapshot.Clock.
	fClocks            = 1
	fPrimaryTraceClock = 2
	fClockID           = 1
	fClockTimestamp    = 2

	// TrackDescriptor.
	fTrackUUID   = 1
	fTrackName   = 2
	fProcess     = 3
	fThread      = 4
	fParentUUID  = 5
	fDescPID     = 1 // ProcessDescriptor.pid, ThreadDescriptor.pid
	fProcessName = 6 // ProcessDescriptor.process_name
	fThreadTID   = 2 // ThreadDescriptor.tid
	fThreadName  = 5 // ThreadDescriptor.thread_name

	// TrackEvent.
	fDebugAnnotations   = 4
	fEventType          = 9
	fEventTrackUUID     = 11
	fEventName          = 23
	fFlowIDs            = 47
	fTerminatingFlowIDs = 48

	// DebugAnnotation.
	fAnnotationUint   = 3
	fAnnotationString = 6
	fAnnotationName   = 10
)

// TrackEvent.Type values.
const (
	typeSliceBegin = 1
	typeSliceEnd   = 2
	typeInstant    = 3
)

// Builtin clock ids (BuiltinClock in protos/perfetto/common).
const (
	clockMonotonic = 3
	clockBoottime  = 6
)

// seqIncrementalStateCleared is TracePacket.SequenceFlags'
// SEQ_INCREMENTAL_STATE_CLEARED: set on the sequence's first packet.
const seqIncrementalStateCleared = 1

// sequenceID is the trusted_packet_sequence_id of every packet: the file
// is one sequence, written by one writer.
const sequenceID = 1

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), v)
}
