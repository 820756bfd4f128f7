package source

// SchedSwitch is one context switch of a target thread, as the scheduler
// source reads it, for observers that draw the threads' time on and off
// the CPUs (Env.OnSwitch).
type SchedSwitch struct {
	Time    int64  // CLOCK_MONOTONIC ns
	PrevTID uint32 // the target thread switched out, or 0
	NextTID uint32 // the target thread switched in, or 0
	CPU     uint32
	// Charged is the CPU time the kernel charged the stint PrevTID ends
	// here, or -1 when unknown (PrevTID is 0, or it was on a CPU since
	// before the probe attached): the stint is [Time−Charged, Time].
	Charged int64
	// Preempted: PrevTID was switched out still runnable (an involuntary
	// switch); clear when it blocked.
	Preempted bool
}
