// Package load generates marked message traffic against a broker and
// measures it end to end, so that what the kernel probes see inside the
// broker can be compared with what a client saw.
//
// A run has one producer and one consumer in this process, on separate
// connections and goroutines; given subscriber URLs (Config.SubURLs), it
// has one consumer on each instead, to measure across the nodes of a
// cluster. Every message body starts with a marker (see
// package marker) carrying a sequential id, padded to the asked size. The
// producer paces open-loop: each message has an intended send time fixed by
// the schedule, a late producer sends at once and records how late it was,
// so broker stalls appear as latency rather than as a silently lower rate.
// Times are CLOCK_MONOTONIC ns (package monotime), the clock of the probes.
//
// Per-message times live in slices allocated before the run starts: the send
// path does not allocate, so the generator does not disturb what it measures.
package load

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/recfile"
)

// Error kinds; test with errors.Is.
var (
	// ErrConfig marks a configuration the run cannot start with (bad URL
	// scheme, size, rate, ...). The CLI maps it to its usage exit code.
	ErrConfig = errors.New("invalid load configuration")
	// ErrUnreachable marks a broker that could not be connected to.
	ErrUnreachable = errors.New("broker unreachable")
)

// Defaults applied to zero Config fields.
const (
	DefaultURL       = "nats://127.0.0.1:4222"
	DefaultSubject   = "brokertrace.load"
	DefaultSize      = 128
	DefaultDrain     = 2 * time.Second
	DefaultBurst     = 10
	DefaultLateAfter = time.Millisecond
)

// MaxMessages bounds one run: per-message times take 24 bytes each (8 more
// per further subscriber) and are all allocated up front.
const MaxMessages = 50_000_000

// Config is what a run is asked to do; load.json records it as its
// options.
type Config = recfile.LoadOptions

// withDefaults fills zero fields.
func withDefaults(c Config) Config {
	c.URL = cmp.Or(c.URL, DefaultURL)
	c.Subject = cmp.Or(c.Subject, DefaultSubject)
	c.Size = cmp.Or(c.Size, DefaultSize)
	c.Drain = cmp.Or(c.Drain, DefaultDrain)
	c.Pattern = cmp.Or(c.Pattern, PatternRegular)
	c.Payload = cmp.Or(c.Payload, PayloadFixed)
	c.Burst = cmp.Or(c.Burst, DefaultBurst)
	c.LateAfter = cmp.Or(c.LateAfter, DefaultLateAfter)
	if c.IDBase == 0 {
		c.IDBase = uint64(time.Now().UnixMicro()) << 12
	}
	return c
}

// capacity returns how many messages the run may send at most, for
// preallocation. It assumes validate passed.
func capacity(c Config) int {
	n := c.Count
	if c.Duration > 0 && c.Rate > 0 {
		slots := int64(float64(c.Duration.Nanoseconds())*c.Rate/1e9) + int64(c.Burst) + 1
		if n == 0 || slots < int64(n) {
			n = int(min(slots, MaxMessages+1))
		}
	}
	return n
}

func validate(c Config) error {
	switch {
	case c.Rate < 0 || c.Rate != c.Rate:
		return configErrorf("rate %v msg/s is invalid: give a rate > 0, or 0 for as fast as possible", c.Rate)
	case c.Count < 0:
		return configErrorf("count %d is invalid: give a number of messages > 0", c.Count)
	case c.Duration < 0:
		return configErrorf("duration %v is invalid: give a duration > 0", c.Duration)
	case c.Count == 0 && c.Duration == 0:
		return configErrorf("neither a count nor a duration given: say how many messages (count) or for how long (duration) to send")
	case c.Rate == 0 && c.Count == 0:
		return configErrorf("rate 0 (as fast as possible) needs a count: per-message times are preallocated, so the run must know its maximum size")
	case c.Warmup < 0:
		return configErrorf("warmup %v is invalid: give a duration ≥ 0", c.Warmup)
	case c.Drain < 0:
		return configErrorf("drain %v is invalid: give a duration ≥ 0", c.Drain)
	case c.LateAfter < 0:
		return configErrorf("late-after %v is invalid: give a duration ≥ 0", c.LateAfter)
	case c.Size < marker.Len:
		return configErrorf("size %d bytes is too small: every message carries a %d-byte marker, so size must be ≥ %d", c.Size, marker.Len, marker.Len)
	case CheckPayload(c.Payload) != nil:
		return CheckPayload(c.Payload)
	case c.Pattern != PatternRegular && c.Pattern != PatternBursty:
		return configErrorf("pattern %q is unknown: use %q or %q", c.Pattern, PatternRegular, PatternBursty)
	case c.Pattern == PatternBursty && c.Rate == 0:
		return configErrorf("pattern bursty needs a rate > 0: bursts are spaced burst/rate apart")
	case c.Burst < 1:
		return configErrorf("burst %d is invalid: give a number of messages ≥ 1", c.Burst)
	}
	if n := capacity(c); n > MaxMessages {
		return configErrorf("run would send up to %d messages, more than the %d kept per run: lower count, rate or duration", n, MaxMessages)
	}
	if c.IDBase+uint64(capacity(c)) < c.IDBase {
		return configErrorf("id base %d leaves no room for %d ids before 2^64: use a smaller id base", c.IDBase, capacity(c))
	}
	return nil
}

// consumer records arrivals. Its methods run on the driver's delivery
// goroutine while the producer and Run read its fields, hence atomics.
type consumer struct {
	idBase     uint64
	markerLast bool    // payloads json and random: the marker ends the body
	recv       []int64 // t_recv_ns by index; 0 = not received
	received   atomic.Int64
	duplicates atomic.Int64
	unexpected atomic.Int64 // marked, but not an id of this run
	unmarked   atomic.Int64 // no marker at the start of the body (json, random: at its end)
	// byOrder: payload "same" with no header for the marker; the k-th
	// filler body to arrive is message k (next counts them).
	byOrder bool
	next    atomic.Uint64
	probed  atomic.Bool // a probe message arrived (see awaitSubscribers)
	stopped atomic.Bool
}

func (c *consumer) onMessage(body []byte) {
	now := monotime.Now()
	if c.stopped.Load() {
		return
	}
	id, ok := marker.Parse(body)
	if !ok && c.markerLast && len(body) >= marker.Len {
		id, ok = marker.Parse(body[len(body)-marker.Len:])
	}
	switch {
	case ok:
		c.take(id, now)
	case bytes.HasPrefix(body, probePrefix):
		c.probed.Store(true)
	case c.byOrder && isFiller(body):
		c.take(c.idBase+c.next.Add(1)-1, now)
	default:
		c.unmarked.Add(1)
	}
}

// take records message id's arrival at now.
func (c *consumer) take(id uint64, now int64) {
	idx := id - c.idBase
	if id < c.idBase || idx >= uint64(len(c.recv)) {
		c.unexpected.Add(1)
		return
	}
	if !atomic.CompareAndSwapInt64(&c.recv[idx], 0, now) {
		c.duplicates.Add(1)
		return
	}
	c.received.Add(1)
}

// producer is the send loop's state.
type producer struct {
	drv      Driver
	cfg      Config
	sched    schedule
	intended []int64
	send     []int64
	body     []byte
	rnd      *rand.Rand // json and random payloads

	start int64
	// Results of the loop, read after it finished.
	sent        int
	planned     int
	interrupted bool
	behind      bool // a duration-limited run ended with the producer behind schedule
	err         error
}

// run is the send loop. It runs on its own locked OS thread (see
// sleepUntil); nothing in the loop allocates.
func (p *producer) run(done <-chan struct{}) {
	runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
	lowerTimerSlack()

	var end int64 = -1
	if p.cfg.Duration > 0 {
		end = p.start + p.cfg.Duration.Nanoseconds()
	}
	grace := p.cfg.LateAfter.Nanoseconds()
	n := len(p.intended)
	p.planned = n
	for i := 0; i < n; i++ {
		select {
		case <-done:
			p.interrupted = true
			p.planned = p.plannedTotal(i, end)
			return
		default:
		}
		var tInt int64
		if p.sched.nsPerMsg > 0 {
			tInt = p.start + p.sched.offset(uint64(i))
			if end >= 0 && tInt >= end {
				p.planned = i
				return
			}
			if !sleepUntil(tInt, done) {
				p.interrupted = true
				p.planned = p.plannedTotal(i, end)
				return
			}
		} else {
			tInt = monotime.Now()
		}
		if end >= 0 && tInt < end {
			// A producer behind schedule by more than the lateness
			// tolerance at the end of a timed run stops; what it did not
			// send is the shortfall.
			if now := monotime.Now(); now >= end+grace || (p.sched.nsPerMsg == 0 && now >= end) {
				p.behind = p.sched.nsPerMsg > 0
				p.planned = p.plannedTotal(i, end)
				return
			}
		}
		p.fill(p.cfg.IDBase + uint64(i))
		tSend := monotime.Now()
		if err := p.publish(); err != nil {
			if e := p.drv.Err(); e != nil {
				err = e
			}
			p.err = fmt.Errorf("publish of message %d (id %d) failed: %w", i, p.cfg.IDBase+uint64(i), err)
			p.planned = p.plannedTotal(i, end)
			return
		}
		p.intended[i] = tInt
		p.send[i] = tSend
		p.sent = i + 1
	}
}

// plannedTotal is how many messages the schedule called for when the loop
// stopped early at index i: all slots before the end for timed runs at a
// rate, the count otherwise; at least i.
func (p *producer) plannedTotal(i int, end int64) int {
	n := len(p.intended)
	if end >= 0 {
		if p.sched.nsPerMsg == 0 {
			return i // as fast as possible until the end: nothing more was asked
		}
		// Slots whose intended time falls before the end.
		lo, hi := i, n
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if p.start+p.sched.offset(uint64(mid)) < end {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		n = lo
	}
	return max(n, i)
}

// Run connects a consumer and a producer to the broker, sends the configured
// messages, waits up to Drain for the stragglers and returns what happened.
//
// Cancelling ctx stops sending at once; the run still drains and returns a
// complete Result (Interrupted set), so the caller can write files for what
// was sent. A lost connection or failed publish also ends sending early: Run
// then returns the Result together with the error. Errors before sending
// starts return a nil Result; they wrap ErrConfig or ErrUnreachable where
// that is the cause.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	// The producer sleeps in clock_nanosleep on its locked thread: a system
	// call during which the runtime keeps the thread's P until its monitor
	// takes it back, up to 10 ms later. With one P (a load pinned to one
	// CPU: GOMAXPROCS follows the affinity mask) the consumer then waits
	// for a P behind every sleep, and messages pile up for seconds in its
	// socket. Two Ps let the kernel share the CPU between the two threads.
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	cfg = withDefaults(cfg)
	if err := validate(cfg); err != nil {
		return nil, err
	}
	u, dial, err := parseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	subURLs, err := subscriberURLs(cfg, u)
	if err != nil {
		return nil, err
	}
	n := capacity(cfg)

	subs, err := dialSubscribers(ctx, dial, subURLs, cfg, n)
	defer closeSubscribers(subs)
	if err != nil {
		return nil, err
	}
	pdrv, err := dial(ctx, u, DialOptions{Subject: cfg.Subject, Size: cfg.Size, Role: "producer"})
	if err != nil {
		return nil, err
	}
	defer pdrv.Close()
	_, hdr := pdrv.(headerPublisher)
	byOrder := cfg.Payload == PayloadSame && !hdr
	for k, s := range subs {
		s.cons.byOrder = byOrder
		if err := s.drv.Subscribe(s.cons.onMessage); err != nil {
			return nil, s.wrap(k, err)
		}
	}

	p := newProducer(pdrv, cfg, n)
	if len(cfg.SubURLs) > 0 {
		if err := awaitSubscribers(ctx, p, u.Redacted(), subs); err != nil {
			return nil, err
		}
	}
	for _, s := range subs {
		// Touch every page now so the receive path takes no page faults.
		prefault(s.cons.recv)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sendEnd := p.runUntil(ctx)
	runErr := drain(p, subs, cfg.Drain)
	drainEnd := monotime.Now()
	if runErr == nil {
		runErr = cmp.Or(subscriberErr(subs), pdrv.Err())
	}

	res := &Result{
		Config:       cfg,
		Driver:       u.Scheme,
		URL:          u.Redacted(),
		StartNs:      p.start,
		SendEndNs:    sendEnd,
		EndNs:        drainEnd,
		Planned:      p.planned,
		Interrupted:  p.interrupted,
		Behind:       p.behind,
		NamedByOrder: byOrder,
	}
	res.collect(p, subs)
	if runErr != nil {
		res.Error = runErr.Error()
	}
	res.summarize()
	return res, runErr
}

// subscriber is one consumer of a run and its connection.
type subscriber struct {
	url      *url.URL
	numbered bool // given as a subscriber URL: errors say which
	drv      Driver
	cons     *consumer
}

// wrap prefixes err by which subscriber it is, k being its index, when
// there can be several.
func (s *subscriber) wrap(k int, err error) error {
	if err == nil || !s.numbered || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("subscriber %d at %s: %w", k+1, s.url.Redacted(), err)
}

// subscriberURLs returns where the run subscribes: on each of cfg.SubURLs,
// else on the producer's URL u. A subscriber speaks the producer's
// protocol: the run's subject means one destination only within one
// protocol.
func subscriberURLs(cfg Config, u *url.URL) ([]*url.URL, error) {
	if len(cfg.SubURLs) == 0 {
		return []*url.URL{u}, nil
	}
	us := make([]*url.URL, 0, len(cfg.SubURLs))
	for _, raw := range cfg.SubURLs {
		su, _, err := parseURL(raw)
		if err != nil {
			return nil, err
		}
		if !strings.EqualFold(su.Scheme, u.Scheme) {
			return nil, configErrorf("subscriber URL %s is %s, but the producer's URL %s is %s: every subscriber must speak the producer's protocol", su.Redacted(), su.Scheme, u.Redacted(), u.Scheme)
		}
		us = append(us, su)
	}
	return us, nil
}

// dialSubscribers connects a consumer to each of us, with receive times for
// n messages each. On error it returns the subscribers connected so far,
// for closeSubscribers. With subscriber URLs, an error names the
// subscriber by its place in Config.SubURLs.
func dialSubscribers(ctx context.Context, dial DialFunc, us []*url.URL, cfg Config, n int) ([]*subscriber, error) {
	subs := make([]*subscriber, 0, len(us))
	for _, su := range us {
		s := &subscriber{url: su, numbered: len(cfg.SubURLs) > 0, cons: &consumer{idBase: cfg.IDBase, recv: make([]int64, n),
			markerLast: cfg.Payload == PayloadJSON || cfg.Payload == PayloadRandom}}
		drv, err := dial(ctx, su, DialOptions{Subject: cfg.Subject, Size: cfg.Size, Role: "consumer"})
		if err != nil {
			return subs, s.wrap(len(subs), err)
		}
		s.drv = drv
		subs = append(subs, s)
	}
	return subs, nil
}

func closeSubscribers(subs []*subscriber) {
	for _, s := range subs {
		s.drv.Close()
	}
}

// probePrefix starts the bodies of probe messages. It is no marker, so
// recordings see probes as unmarked traffic and never as messages of a run.
var probePrefix = []byte("BTPROBE")

// probeTimeout bounds the wait for every subscriber to get a probe.
const probeTimeout = 10 * time.Second

// awaitSubscribers publishes a probe message every 10 ms until every
// subscriber received one. On a cluster, Subscribe returns once the
// subscription is in effect at the subscriber's node, but the producer's
// node learns of it only when the cluster has passed it on: the run's first
// messages would be lost to subscribers on other nodes without this wait.
func awaitSubscribers(ctx context.Context, p *producer, pubURL string, subs []*subscriber) error {
	body := slices.Clone(p.body)
	copy(body, probePrefix)
	deadline := time.Now().Add(probeTimeout)
	for n := 1; ; n++ {
		// Numbered, so that no two probes are alike: matching by frame
		// sees them as messages, and alike ones as ambiguous.
		strconv.AppendInt(body[:len(probePrefix)], int64(n%1e9), 10)
		k := slices.IndexFunc(subs, func(s *subscriber) bool { return !s.cons.probed.Load() })
		if k < 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := cmp.Or(subscriberErr(subs), p.drv.Err()); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("subscriber %d at %s received none of the probe messages published at %s in %v: is it a node of the same cluster, subscribed to the same destination?",
				k+1, subs[k].url.Redacted(), pubURL, probeTimeout)
		}
		if err := p.drv.Publish(body); err != nil {
			return fmt.Errorf("publishing a probe message: %w", cmp.Or(p.drv.Err(), err))
		}
		flushCtx, cancel := context.WithTimeout(ctx, time.Second)
		err := p.drv.Flush(flushCtx)
		cancel()
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("flushing a probe message: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// subscriberErr returns the asynchronous error of the first subscriber
// whose connection reported one, or nil.
func subscriberErr(subs []*subscriber) error {
	k := slices.IndexFunc(subs, func(s *subscriber) bool { return s.drv.Err() != nil })
	if k < 0 {
		return nil
	}
	return subs[k].wrap(k, subs[k].drv.Err())
}

// newProducer allocates and prefaults the per-message times of up to n
// messages before the run, so that the send path does not allocate.
func newProducer(drv Driver, cfg Config, n int) *producer {
	p := &producer{
		drv:      drv,
		cfg:      cfg,
		sched:    newSchedule(cfg.Rate, cfg.Pattern, cfg.Burst),
		intended: make([]int64, n),
		send:     make([]int64, n),
		body:     make([]byte, cfg.Size),
		rnd:      rand.New(rand.NewPCG(cfg.IDBase, uint64(cfg.Size))),
	}
	fillBody(p.body)
	prefault(p.intended)
	prefault(p.send)
	return p
}

// runUntil sends on a goroutine of its own until the schedule ends or ctx
// is cancelled, and returns when sending ended.
func (p *producer) runUntil(ctx context.Context) int64 {
	done := make(chan struct{})
	stopWatch := context.AfterFunc(ctx, func() { close(done) })
	defer stopWatch()

	p.start = monotime.Now()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		p.run(done)
	}()
	<-finished
	return monotime.Now()
}

// drain waits until everything published reached the broker, then gives
// every subscriber up to wait (from the last send) for the rest, and stops
// them. A subscriber whose connection failed is not waited for. It returns
// the first error of the run: the producer's, else a failed flush.
func drain(p *producer, subs []*subscriber, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var runErr error = p.err
	flushCtx, cancel := context.WithDeadline(context.Background(), deadline)
	if err := p.drv.Flush(flushCtx); err != nil && runErr == nil && p.sent > 0 {
		runErr = fmt.Errorf("producer flush after %d messages: %w", p.sent, err)
	}
	cancel()
	waiting := func(s *subscriber) bool {
		return s.cons.received.Load() < int64(p.sent) && s.drv.Err() == nil
	}
	for slices.ContainsFunc(subs, waiting) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	for _, s := range subs {
		s.cons.stopped.Store(true)
	}
	return runErr
}

// collect fills the per-message times of the messages sent, each
// subscriber's receive times and counts, and the top-level ones, which are
// subscriber 1's.
func (res *Result) collect(p *producer, subs []*subscriber) {
	res.Intended = p.intended[:p.sent:p.sent]
	res.Send = p.send[:p.sent:p.sent]
	res.Sent = p.sent
	res.Subscribers = make([]Subscriber, len(subs))
	for k, s := range subs {
		res.Subscribers[k] = s.collect(p.sent)
	}
	s1 := res.Subscribers[0]
	res.Recv = s1.Recv
	res.Received, res.Missing = s1.Received, s1.Missing
	res.Duplicates, res.Unexpected, res.Unmarked = s1.Duplicates, s1.Unexpected, s1.Unmarked
	res.ClientDropped = s1.ClientDropped
}

// collect returns what the subscriber received of the sent messages: a
// receive time in this run's id range past the last sent is an id that was
// never sent, counted unexpected.
func (s *subscriber) collect(sent int) Subscriber {
	c := s.cons
	r := Subscriber{
		URL:           s.url.Redacted(),
		Recv:          make([]int64, sent),
		Duplicates:    int(c.duplicates.Load()),
		Unexpected:    int(c.unexpected.Load()),
		Unmarked:      int(c.unmarked.Load()),
		ClientDropped: s.drv.Dropped(),
	}
	for i := range c.recv {
		t := atomic.LoadInt64(&c.recv[i])
		if i < sent {
			r.Recv[i] = t
			if t != 0 {
				r.Received++
			}
		} else if t != 0 {
			r.Unexpected++
		}
	}
	r.Missing = sent - r.Received
	return r
}

// fillBody writes the filler after the marker slot. '.' can never start or
// continue a marker, so a body holds exactly one.
func fillBody(b []byte) {
	for i := marker.Len; i < len(b); i++ {
		b[i] = '.'
	}
}

func prefault(s []int64) {
	const perPage = 4096 / 8
	for i := 0; i < len(s); i += perPage {
		s[i] = 0
	}
}
