package sockq

import "sort"

// Outcome says how a Lookup went.
type Outcome uint8

const (
	// Found: the arrival time is known.
	Found Outcome = iota
	// NoSocket: the socket was never sampled: it is not on a watched port
	// (a connection the broker opened itself), or its samples were lost.
	NoSocket
	// BeforeProbe: the connection predates the probe and the message's
	// bytes came with the first chunk the probe saw on it, which may have
	// begun arriving earlier.
	BeforeProbe
	// NoSample: no sample of the socket reached the message's last byte by
	// the time it was read; samples were lost (ring buffer full).
	NoSample
	// Pruned: the samples needed were older than the horizon and dropped.
	Pruned
)

var outcomeNames = [...]string{"found", "no_socket", "before_probe", "no_sample", "pruned"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// point is one sample of a stream. ext is the receive sequence number
// extended to 64 bits (it counts the stream's wraps), so that samples sort
// by it however many times 32-bit sequence numbers wrapped.
type point struct {
	ext int64
	ts  int64
}

// stream holds the samples of one socket lifetime (one cookie), in the
// order the kernel took them: time and extended sequence both increase.
type stream struct {
	cookie  uint64
	born    bool  // the first sample is the connection's start
	firstTs int64 // time of the first sample, also once pruned
	last    point // newest sample, also once pruned
	pts     []point
	head    int   // pts[:head] are pruned
	pruned  bool  // some samples were pruned
	prunExt int64 // ext of the newest pruned sample
}

func (s *stream) live() []point { return s.pts[s.head:] }

// sockHist holds the streams of one socket address, oldest first: the
// kernel reuses the memory of closed sockets.
type sockHist struct {
	streams []*stream
}

// Arrivals keeps, per socket, when the receive queue reached which
// sequence number, and answers for a message — its socket, the sequence
// number just past its last byte, and the time it was read — when its bytes
// arrived. It is not safe for concurrent use.
type Arrivals struct {
	horizon int64
	socks   map[uint64]*sockHist
	newest  int64
	// Counters of what Add saw.
	Samples uint64 // samples kept
	Stale   uint64 // samples that did not move the sequence (ignored)
	Streams uint64 // socket lifetimes seen
}

// NewArrivals returns an empty store that Prune limits to horizon ns
// behind the newest sample.
func NewArrivals(horizon int64) *Arrivals {
	return &Arrivals{horizon: horizon, socks: map[uint64]*sockHist{}}
}

// Add records a sample. Samples of one socket must come in the order the
// kernel took them (the socket's lock orders them; the ring buffer keeps
// that order).
func (a *Arrivals) Add(smp *Sample) {
	a.newest = max(a.newest, smp.Time)
	h := a.socks[smp.Sock]
	if h == nil {
		h = &sockHist{}
		a.socks[smp.Sock] = h
	}
	var s *stream
	if n := len(h.streams); n > 0 && h.streams[n-1].cookie == smp.Cookie {
		s = h.streams[n-1]
	} else {
		s = &stream{cookie: smp.Cookie, born: smp.Born, firstTs: smp.Time}
		p := point{ext: int64(smp.RcvNxt), ts: smp.Time}
		s.pts = append(s.pts, p)
		s.last = p
		h.streams = append(h.streams, s)
		a.Streams++
		a.Samples++
		return
	}
	// Sequence numbers wrap at 2^32; consecutive samples of one stream
	// are less than 2^31 apart (at most a receive window).
	d := int32(smp.RcvNxt - uint32(s.last.ext))
	if d <= 0 {
		a.Stale++
		return
	}
	p := point{ext: s.last.ext + int64(d), ts: max(smp.Time, s.last.ts)}
	s.pts = append(s.pts, p)
	s.last = p
	a.Samples++
}

// Lookup returns when the bytes of sock before sequence number seq had all
// arrived: the time of the first sample at or past seq, among the samples
// taken by tIn (when the broker read the byte before seq).
func (a *Arrivals) Lookup(sock uint64, seq uint32, tIn int64) (int64, Outcome) {
	h := a.socks[sock]
	if h == nil {
		if tIn < a.newest-a.horizon {
			return 0, Pruned
		}
		return 0, NoSocket
	}
	// The socket lifetime the message was read from began by tIn.
	var s *stream
	for i := len(h.streams) - 1; i >= 0; i-- {
		if h.streams[i].firstTs <= tIn {
			s = h.streams[i]
			break
		}
	}
	if s == nil {
		if tIn < a.newest-a.horizon {
			return 0, Pruned
		}
		return 0, NoSocket
	}
	live := s.live()
	// i: the newest sample taken by tIn. The message's bytes had arrived
	// by then, so seq lies at or before that sample, within a receive
	// queue's length: that resolves seq's wraps.
	i := sort.Search(len(live), func(k int) bool { return live[k].ts > tIn }) - 1
	if i < 0 {
		if s.pruned {
			return 0, Pruned
		}
		return 0, NoSample
	}
	ref := live[i]
	target := ref.ext + int64(int32(seq-uint32(ref.ext)))
	if target > ref.ext {
		return 0, NoSample
	}
	if s.pruned && target <= s.prunExt {
		return 0, Pruned
	}
	j := sort.Search(i+1, func(k int) bool { return live[k].ext >= target })
	if j == 0 && !s.pruned && !s.born {
		// The first sample of a connection older than the probe: its
		// chunk may have begun arriving before the probe was attached.
		return 0, BeforeProbe
	}
	return live[j].ts, Found
}

// Prune drops the samples more than the horizon older than the newest one,
// and the sockets left without samples. A message read that long ago gets
// Pruned from Lookup.
func (a *Arrivals) Prune() {
	cut := a.newest - a.horizon
	for sock, h := range a.socks {
		keep := h.streams[:0]
		for _, s := range h.streams {
			live := s.live()
			n := sort.Search(len(live), func(k int) bool { return live[k].ts >= cut })
			if n > 0 {
				s.pruned = true
				s.prunExt = live[n-1].ext
				s.head += n
				a.Samples -= uint64(n)
				// Give the memory back once most of it is pruned.
				if s.head > len(s.pts)/2 {
					s.pts = append([]point(nil), s.pts[s.head:]...)
					s.head = 0
				}
			}
			if len(s.live()) > 0 {
				keep = append(keep, s)
			}
		}
		clear(h.streams[len(keep):])
		h.streams = keep
		if len(keep) == 0 {
			delete(a.socks, sock)
		}
	}
}

// Sockets is the number of sockets with samples kept.
func (a *Arrivals) Sockets() int { return len(a.socks) }
