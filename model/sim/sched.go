package sim

import (
	"math"
	"slices"
)

// The scheduling strategy of ICPE'14 §4.3, on m.CPUs processors.

// eligible: a broker thread may not start a token during a GC pause.
func (e *engine) eligible(s int) bool { return !e.gc || e.m.Stages[s].Outside }

// wake makes thread s runnable: on an idle CPU if there is one (the one it
// ran on last, as Linux prefers a task's previous CPU, else one never
// used, else the first), or at the back of the ready queue. Waking a CPU
// that had parked is what costs: the thread starts WakeLatencyNs later
// and pays WakePenaltyNs; an idle CPU still polling for work (SpinNs)
// takes the token at once, and a thread queued on a busy CPU waits its
// turn. Every wake of a blocked broker thread counts as a wake-up.
func (e *engine) wake(s int) {
	th := &e.threads[s]
	if th.cpu >= 0 || th.queued {
		return
	}
	if k := e.idleCPU(s); k >= 0 && e.eligible(s) {
		late := 0.0
		if !e.unspin(k) {
			e.woken(s)
			th.woken, late = true, e.m.WakeLatencyNs
			if e.now >= e.w0 && e.now < e.w1 {
				e.r.Unparks++
			}
		}
		pen := 0.0
		if th.woken {
			pen = e.m.WakePenaltyNs
		}
		e.start(k, s)
		c := &e.cpus[k]
		c.start, c.end = c.start+late, c.end+late
		if s == 0 {
			e.readAt(c.start + pen)
		}
		return
	}
	e.woken(s) // onto a busy CPU: it waits its turn, the CPU was awake
	th.queued = true
	e.ready = append(e.ready, s)
}

// readAt: the first stage, woken from a parked CPU, reads at t every
// token waiting for it, and every token that arrives before t. A broker's latency is measured from that read
// (t_in) to its write, so the wake-up that came before the read (the
// CPU's exit from idle, the thread's wake penalty) is not in it.
func (e *engine) readAt(t float64) {
	e.read0 = t
	q := &e.threads[0].q
	for i := range q.n {
		tok := &q.buf[(q.head+i)%len(q.buf)]
		tok.entry = max(tok.entry, t)
	}
}

// woken counts a wake-up of broker thread s; an outside stage (the
// kernel's work for the broker) has no thread of the broker to wake.
func (e *engine) woken(s int) {
	if e.m.Stages[s].Outside {
		return
	}
	if e.now >= e.w0 && e.now < e.w1 {
		e.r.Wakeups++
	}
}

// unspin ends idle CPU k's polling: its spin so far is the broker's CPU
// time; true if it was still polling (a token it takes needs no wake-up).
func (e *engine) unspin(k int) bool {
	c := &e.cpus[k]
	end := c.idleSince + e.m.SpinNs
	e.accountSpin(c.idleSince, min(end, e.now))
	c.idleSince = math.Inf(-1)
	return e.now < end
}

// accountSpin adds polling [a, b] inside the window.
func (e *engine) accountSpin(a, b float64) {
	if lo, hi := max(a, e.w0), min(b, e.w1); hi > lo {
		e.spin += hi - lo
	}
}

func (e *engine) idleCPU(s int) int {
	best := -1
	for k := range e.cpus {
		c := &e.cpus[k]
		switch {
		case c.cur >= 0:
		case c.last == s:
			return k
		case best < 0 || c.last < 0 && e.cpus[best].last >= 0:
			best = k
		}
	}
	return best
}

// schedule gives idle CPU k the first eligible thread of the ready queue;
// with none, the CPU goes idle and polls for SpinNs.
func (e *engine) schedule(k int) {
	i := slices.IndexFunc(e.ready, e.eligible)
	if i < 0 {
		if c := &e.cpus[k]; c.cur < 0 && math.IsInf(c.idleSince, -1) {
			c.idleSince = e.now
		}
		return
	}
	e.unspin(k)
	s := e.ready[i]
	e.ready = slices.Delete(e.ready, i, i+1)
	e.threads[s].queued = false
	e.start(k, s)
}

// start runs thread s on CPU k, paying c when the CPU last ran another.
func (e *engine) start(k, s int) {
	c := &e.cpus[k]
	e.threads[s].cpu = k
	c.cur, c.slice = s, 0
	pen := 0.0
	if th := &e.threads[s]; th.woken {
		th.woken, pen = false, e.m.WakePenaltyNs
	}
	if c.last != s {
		if c.last >= 0 {
			pen += e.m.SwitchPenaltyNs
			if e.now >= e.w0 && e.now < e.w1 {
				e.r.Switches++
			}
		}
		c.last = s
	}
	e.serve(k, pen)
}

// serve starts the next token of CPU k's thread.
func (e *engine) serve(k int, penalty float64) {
	c := &e.cpus[k]
	c.demand = e.m.Stages[c.cur].Demand.sample(e.rng[c.cur]) + penalty
	c.start, c.end = e.now, e.now+c.demand
}

// complete ends the token in service on CPU k, passes it on, and decides
// what the CPU runs next.
func (e *engine) complete(k int) {
	c := &e.cpus[k]
	s := c.cur
	th := &e.threads[s]
	e.account(s, c.start, c.end)
	c.slice += c.demand
	tok := th.q.pop()
	if s == e.lastBroker {
		e.leave(tok)
	}
	if s+1 < len(e.threads) {
		e.threads[s+1].q.push(tok)
		e.wake(s + 1)
	}
	switch {
	case th.q.n == 0:
		e.release(k)
	case !e.eligible(s): // GC: stop at this safepoint, first to resume
		e.release(k)
		th.queued = true
		e.ready = slices.Insert(e.ready, 0, s)
	case e.m.QuantumNs > 0 && c.slice >= e.m.QuantumNs && slices.ContainsFunc(e.ready, e.eligible):
		e.release(k)
		th.queued = true
		e.ready = append(e.ready, s)
	default:
		e.serve(k, 0)
		return
	}
	e.schedule(k)
}

func (e *engine) release(k int) {
	e.threads[e.cpus[k].cur].cpu = -1
	e.cpus[k].cur = -1
}

// leave: tok is through the broker.
func (e *engine) leave(tok token) {
	e.inBroker--
	if tok.idx < e.end {
		e.done++
	}
	if tok.idx >= e.first && tok.idx < e.end {
		lat := e.now - tok.entry + e.m.PathLatencyNs
		e.r.Latency.Add(lat)
		if e.o.OnMessage != nil {
			e.o.OnMessage(tok.idx, lat)
		}
	}
	if e.now >= e.w0 && e.now < e.w1 {
		e.r.Completed++
	}
	if e.m.QueueCapacity > 0 {
		e.admit()
	}
}

// account adds stage s's busy time [a, b] inside the window.
func (e *engine) account(s int, a, b float64) {
	if lo, hi := max(a, e.w0), min(b, e.w1); hi > lo {
		e.busy[s] += hi - lo
	}
}

func (e *engine) result() *Result {
	r := e.r
	r.WindowNs = e.w1 - e.w0
	if r.WindowNs <= 0 {
		return r
	}
	r.OfferedRate = float64(e.end-e.first) / r.WindowNs * 1e9
	r.ArrivalCV = e.a.gapCV(e.first, e.end)
	r.Throughput = float64(r.Completed) / r.WindowNs * 1e9
	r.SpinUtil = e.spin / r.WindowNs
	r.BrokerUtil = r.SpinUtil + e.m.BackgroundUtil
	r.SystemUtil = r.BrokerUtil + float64(r.Wakeups)*e.m.SystemWakeNs/r.WindowNs
	for s, b := range e.busy {
		u := b / r.WindowNs
		r.StageUtil = append(r.StageUtil, u)
		r.SystemUtil += u
		if !e.m.Stages[s].Outside {
			r.BrokerUtil += u
		}
	}
	// The background runs in the time the stages leave, in place of
	// polling: a CPU that polls every gap has no time left for it
	// (RabbitMQ's model read 1.016 CPUs on its one CPU before this).
	r.BrokerUtil = min(r.BrokerUtil, float64(e.m.CPUs))
	if r.Completed > 0 {
		r.SwitchesPerMsg = float64(r.Switches) / float64(r.Completed)
		r.WakeupsPerMsg = float64(r.Wakeups) / float64(r.Completed)
		r.UnparksPerMsg = float64(r.Unparks) / float64(r.Completed)
	}
	if n := e.end - e.first; n > 0 {
		r.InputWaitMeanNs = e.waitSum / float64(n)
	}
	return r
}
