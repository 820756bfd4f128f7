package sim

import (
	"errors"
	"math"
	"math/rand/v2"
)

// Options control one simulation.
type Options struct {
	// Messages are measured after Warmup messages are discarded (both
	// rounded up to whole bursts).
	Messages, Warmup int
	Seed             uint64
	// OnMessage, if set, gets each measured message's index and latency,
	// in order of completion.
	OnMessage func(i int, latencyNs float64)
}

// Result is what one simulation predicts. Rates and utilisations are over
// the window from the first measured message's arrival to the arrival of
// the message after the last measured one.
type Result struct {
	OfferedRate float64 // msg/s arriving in the window
	Throughput  float64 // msg/s through the last broker stage in the window
	// BrokerUtil is the broker stages' CPU in CPUs' worth; SystemUtil
	// adds the outside stages; StageUtil is per stage.
	BrokerUtil, SystemUtil float64
	StageUtil              []float64
	// SwitchesPerMsg counts the model's thread changes on a CPU (each
	// pays the penalty c) per message through the broker.
	SwitchesPerMsg float64
	// WakeupsPerMsg counts the wake-ups of blocked threads (each pays
	// the wake penalty) per message through the broker: the model's
	// voluntary switches. SpinUtil is the CPU idle CPUs spent polling
	// before they parked, in CPUs' worth (part of BrokerUtil).
	WakeupsPerMsg, SpinUtil float64
	// UnparksPerMsg counts the wake-ups that woke a parked CPU: those
	// that pay the wake penalty and latency.
	UnparksPerMsg float64
	// Latency: entry into the first stage (its read, after any wake-up of
	// a parked CPU) to the end of the last broker stage, measured
	// messages only.
	Latency Hist
	// InputWaitMeanNs is the mean time measured messages waited outside
	// the broker (a GC pause, a full queue) before entering.
	InputWaitMeanNs float64
	MaxInBroker     int
	// ArrivalCV is the coefficient of variation of the gaps between the
	// measured messages' arrivals (0 regular, √(b−1) in bursts of b).
	ArrivalCV  float64
	First, End int     // measured messages' indices [First, End)
	WindowNs   float64 // the window's length
	Completed  int64   // messages through the broker in the window
	Switches   int64   // in the window
	Wakeups    int64   // in the window
	Unparks    int64   // in the window
	Events     int64
}

type token struct {
	idx           int
	arrive, entry float64
}

// fifo is a growable ring of tokens.
type fifo struct {
	buf     []token
	head, n int
}

func (f *fifo) push(t token) {
	if f.n == len(f.buf) {
		nb := make([]token, max(16, 2*len(f.buf)))
		for i := range f.n {
			nb[i] = f.buf[(f.head+i)%len(f.buf)]
		}
		f.buf, f.head = nb, 0
	}
	f.buf[(f.head+f.n)%len(f.buf)] = t
	f.n++
}

func (f *fifo) pop() token {
	t := f.buf[f.head]
	f.head = (f.head + 1) % len(f.buf)
	f.n--
	return t
}

type thread struct {
	q      fifo
	cpu    int  // the CPU running it, -1 if none
	queued bool // in the ready queue
	woken  bool // it blocked and was woken: its next start pays the wake penalty
}

type cpuState struct {
	cur, last          int     // running thread (-1 idle), last one run (-1 none)
	idleSince          float64 // when it went idle (-Inf: never ran)
	slice              float64
	start, end, demand float64 // the token in service
}

type engine struct {
	m          *Model
	a          *Arrivals
	o          Options
	rng        []*rand.Rand
	threads    []thread
	cpus       []cpuState
	ready      []int
	now        float64
	next       int // next arrival to admit
	total      int
	inBroker   int
	garbage    int
	gc         bool
	gcUntil    float64
	lastBroker int
	first, end int
	done       int // messages below end through the broker
	w0, w1     float64
	busy       []float64
	spin       float64 // polling before parking, inside the window
	read0      float64 // when the first stage, woken, reads next
	waitSum    float64
	r          *Result
}

// Run simulates m under arrivals a. It is deterministic for a seed.
func Run(m *Model, a Arrivals, o Options) (*Result, error) {
	if err := errors.Join(m.Validate(), a.validate()); err != nil {
		return nil, err
	}
	first, end, err := a.window(o.Warmup, o.Messages)
	if err != nil {
		return nil, err
	}
	e := &engine{m: m, a: &a, o: o, first: first, end: end, total: a.total(), r: &Result{First: first, End: end}}
	e.w0, e.w1 = a.at(first), a.at(end)
	e.threads = make([]thread, len(m.Stages))
	e.busy = make([]float64, len(m.Stages))
	for i := range m.Stages {
		e.threads[i].cpu = -1
		e.rng = append(e.rng, rand.New(rand.NewPCG(o.Seed, uint64(i)+0x9e3779b97f4a7c15)))
		if !m.Stages[i].Outside {
			e.lastBroker = i
		}
	}
	e.cpus = make([]cpuState, m.CPUs)
	for k := range e.cpus {
		e.cpus[k].cur, e.cpus[k].last, e.cpus[k].idleSince = -1, -1, math.Inf(-1)
	}
	if err := e.loop(); err != nil {
		return nil, err
	}
	return e.result(), nil
}

// Event kinds, in the order they are handled when simultaneous.
const (
	evGCEnd = iota
	evCPU
	evArrival
	evNone
)

func (e *engine) loop() error {
	for e.done < e.end || e.now < e.w1 {
		t, kind, k := e.nextEvent()
		if kind == evNone || e.done == e.end && t > e.w1 {
			if e.done < e.end {
				return errors.New("simulation stalled: messages left with nothing to run them (a bug)")
			}
			e.now = e.w1
			break
		}
		e.now = t
		e.r.Events++
		switch kind {
		case evGCEnd:
			e.endGC()
		case evCPU:
			e.complete(k)
		case evArrival:
			e.admit()
		}
	}
	for k := range e.cpus {
		if c := &e.cpus[k]; c.cur >= 0 {
			e.account(c.cur, c.start, c.end)
		} else {
			e.accountSpin(c.idleSince, min(c.idleSince+e.m.SpinNs, e.now))
		}
	}
	return nil
}

func (e *engine) nextEvent() (t float64, kind, cpu int) {
	t, kind = math.Inf(1), evNone
	if e.gc {
		t, kind = e.gcUntil, evGCEnd
	}
	for k := range e.cpus {
		if c := &e.cpus[k]; c.cur >= 0 && c.end < t {
			t, kind, cpu = c.end, evCPU, k
		}
	}
	if e.gateOpen() && e.next < e.total {
		if at := e.a.at(e.next); at < t {
			t, kind = at, evArrival
		}
	}
	return t, kind, cpu
}

func (e *engine) gateOpen() bool {
	return !e.gc && (e.m.QueueCapacity == 0 || e.inBroker < e.m.QueueCapacity)
}

// admit lets in every message that has arrived, while the gate is open.
func (e *engine) admit() {
	for e.gateOpen() && e.next < e.total && e.a.at(e.next) <= e.now {
		i := e.next
		e.next++
		tok := token{idx: i, arrive: e.a.at(i), entry: max(e.now, e.read0)}
		e.inBroker++
		e.r.MaxInBroker = max(e.r.MaxInBroker, e.inBroker)
		if i >= e.first && i < e.end {
			e.waitSum += e.now - tok.arrive
		}
		if e.garbage++; e.m.GCThreshold > 0 && e.garbage >= e.m.GCThreshold {
			e.garbage, e.gc, e.gcUntil = 0, true, e.now+e.m.GCPauseNs
		}
		e.threads[0].q.push(tok)
		e.wake(0)
	}
}

func (e *engine) endGC() {
	e.gc = false
	e.admit()
	for k := range e.cpus {
		if e.cpus[k].cur < 0 {
			e.schedule(k)
		}
	}
}
