package recfile

// MatchCheckFile lists, with --match both, every copy on which matching by
// marker and matching by frame disagree: a copy only one of them found, or
// one both found but paired with another message or other threads.
const MatchCheckFile = "match_check.csv"

// Kinds of MatchCheckRow.
const (
	// CheckMarkerOnly: a copy matched by marker that matching by frame
	// did not find where the marker's bytes left.
	CheckMarkerOnly = "marker_only"
	// CheckFrameOnly: a copy matched by frame that carried no marker
	// (a message without one, or a marker the socket probe lost).
	CheckFrameOnly = "frame_only"
	// CheckDiffers: both found the copy, but matched it to another
	// message in, or give it other threads.
	CheckDiffers = "differs"
)

// MatchCheckRow is one copy of match_check.csv. The t_*, tid and port
// columns are the marker row's, or the frame row's for frame_only; the
// frame_* columns are the frame row's where there is one, else 0.
type MatchCheckRow struct {
	Kind     string `csv:"kind"`
	ID       uint64 `csv:"id"`        // the marker's id; 0 for frame_only
	FrameKey uint64 `csv:"frame_key"` // the frame row's key (payload and subject fingerprint)
	TIn      int64  `csv:"t_in_ns"`
	TOut     int64  `csv:"t_out_ns"`
	InTID    uint32 `csv:"in_tid"`
	OutTID   uint32 `csv:"out_tid"`
	InLPort  uint16 `csv:"in_lport"`
	InRPort  uint16 `csv:"in_rport"`
	OutLPort uint16 `csv:"out_lport"`
	OutRPort uint16 `csv:"out_rport"`
	InSeq    uint32 `csv:"in_seq"`
	OutSeq   uint32 `csv:"out_seq"`
	// The frame row's message in: where it ended and on which connection,
	// and its threads.
	FrameTIn     int64  `csv:"frame_t_in_ns"`
	FrameInTID   uint32 `csv:"frame_in_tid"`
	FrameOutTID  uint32 `csv:"frame_out_tid"`
	FrameInLPort uint16 `csv:"frame_in_lport"`
	FrameInRPort uint16 `csv:"frame_in_rport"`
	FrameInSeq   uint32 `csv:"frame_in_seq"`
}

// MatchCheck is meta.json's account of --match both: the copies matched by
// marker (the truth, in messages.csv) against those matched by frame in
// the same recording, by a second socket probe.
type MatchCheck struct {
	// Copies are the rows of messages.csv; each is Matched, Differs or
	// MarkerOnly. A copy is known by where it left in the outgoing stream,
	// its message by where it ended in the incoming one.
	Copies     uint64 `json:"copies"`
	Matched    uint64 `json:"matched"`     // the frame row has the same message in (and threads, if the same calls)
	Differs    uint64 `json:"differs"`     // the frame row has another message in, or other threads
	MarkerOnly uint64 `json:"marker_only"` // no frame row where the copy left
	// FrameOnly are frame rows without a marker row: messages that
	// carried no marker.
	FrameOnly uint64 `json:"frame_only"`
	// OtherCalls are the matched copies whose marker and payload's end
	// came in different calls (a frame split across reads or writes, the
	// marker in a header or early in the payload): the two rows' times and
	// threads are those of different calls.
	OtherCalls uint64 `json:"other_calls"`
	// MaxDtNs is the largest difference between the two rows' times of a
	// matched copy whose marker and payload's end came in the same calls:
	// each probe stamps the same call in its own run.
	MaxDtNs int64 `json:"max_dt_ns"`
	// Frame is the frame matcher's account (ambiguous: DuplicateIn;
	// copies with no read: OutWithoutIn), FrameProbe its probe's.
	Frame      MessageCounts  `json:"frame_messages"`
	FrameProbe SocketCounters `json:"frame_probe"`
}
