/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Layout shared between bpf/sched.bpf.c and its Go loader (probes/sched,
 * through bpf2go -type). Changing a struct here changes the Go types on the
 * next `make generate`.
 */
#ifndef BROKERTRACE_SCHED_H
#define BROKERTRACE_SCHED_H

#define SCHED_COMM_LEN 16

enum sched_thread_flags {
	/* The thread's kernel counters (nvcsw, nivcsw, sum_exec_runtime) were
	 * read while it was off CPU (switch-in, wakeup, creation) or at a
	 * switch-out, so every later switch-out is counted exactly from the
	 * counters' change. Without it the first switch-out is classified from
	 * the tracepoint's arguments. */
	SCHED_TF_BASELINE = 1,
	SCHED_TF_NEW = 2,    /* created (sched_wakeup_new) while traced */
	SCHED_TF_EXITED = 4, /* sched_process_exit seen */
	SCHED_TF_DEAD = 8,   /* its final switch (prev_state TASK_DEAD) seen */
};

/*
 * Cumulative counters of one target thread (hash map keyed by tid). Nothing
 * is ever reset while the probe runs: user space samples the map and
 * subtracts, so switches between any two instants come from two reads.
 */
struct thread_stats {
	__u64 voluntary;     /* switch-outs the kernel counted in nvcsw (the task blocked) */
	__u64 involuntary;   /* switch-outs the kernel counted in nivcsw */
	__u64 preempted;     /* switch-outs with the tracepoint's preempt = true */
	/* Switch-outs where the classification by the tracepoint's arguments
	 * (voluntary iff !preempt && prev_state != TASK_RUNNING) disagrees
	 * with the kernel's: counted voluntary by the kernel but involuntary
	 * by the arguments (a pending signal kept the task from blocking), and
	 * the reverse (not known to happen). */
	__u64 vol_args_invol;
	__u64 invol_args_vol;
	__u64 guessed;       /* switch-outs classified from the arguments: no counter baseline yet */
	__u64 missed_ins;    /* switch-outs whose switch-in the probe never saw (see sched.bpf.c) */
	__u64 switch_ins;    /* times put on a CPU */
	/* On-CPU time as the kernel charges it: per stint, the growth of
	 * se.sum_exec_runtime from the last observation to the switch-out
	 * (put_prev_task ran update_curr just before the tracepoint), summed.
	 * Not the clock between sched_switch in and out: a thread woken onto
	 * an idle CPU is charged from its wake-up (the idle CPU's run-queue
	 * clock is updated then and __schedule skips the update), so the idle
	 * exit before its switch-in is its time too; time the hypervisor
	 * stole is not (PARAVIRT_TIME_ACCOUNTING). Stints whose switch-in the
	 * probe missed count the same way, so it equals cpu_ns but for the
	 * stint during which the probe attached, which neither counts. */
	__u64 oncpu_ns;
	/* The clock from switch-in to switch-out, summed over stints whose
	 * switch-in the probe saw, their charge for those it missed: what
	 * oncpu_ns was before it followed the kernel's charge. Stolen time is in it, the charge before a
	 * switch-in is not; kept so that the stints' timing can be checked
	 * against fields the probe never reads (schedstat's run_delay). */
	__u64 clock_ns;
	__u64 cpu_ns;        /* se.sum_exec_runtime growth: the scheduler's CPU time (no steal time) */
	__u64 wait_ns;       /* sched_wakeup → switch-in, summed */
	__u64 waits;
	__u64 preempt_wait_ns; /* switched out still runnable → switch-in, summed */
	__u64 preempt_waits;
	__u64 wakeups;       /* sched_wakeup + sched_wakeup_new */
	__u64 oncpu_since;   /* ktime of the switch-in while on a CPU, else 0 */
	__u64 exit_ns;       /* ktime of sched_process_exit, else 0 */
	/* Probe state, exported because user space gets it for free. */
	__u64 wake_ts;       /* pending sched_wakeup, not yet on a CPU */
	__u64 runnable_ts;   /* switched out still runnable, not yet back */
	__u64 last_nvcsw;    /* kernel counters at the last observation */
	__u64 last_nivcsw;
	__u64 last_runtime;
	__u32 tid;
	__u32 cpu;           /* CPU of the last switch */
	__u32 flags;         /* enum sched_thread_flags */
	__u32 _pad;
	char comm[SCHED_COMM_LEN];
};

/* Per-CPU counters (per-CPU array, one slot). */
struct cpu_stats {
	__u64 switches;      /* every context switch on this CPU, any task, idle included */
	__u64 target_out;    /* switches on this CPU whose prev is a target thread */
	__u64 target_in;     /* switches on this CPU whose next is a target thread */
	__u64 dropped;       /* target-thread events lost because the thread map was full */
	__u64 events;        /* switch events written to the ring buffer */
	__u64 events_dropped; /* switch events lost because the ring buffer was full */
};

/*
 * One context switch that involves a target thread, for per-message
 * attribution in user space (which switches, and how much on-CPU time, fall
 * between a message's read and write). Written only when the loader turns
 * the stream on.
 */
struct sched_event {
	__u64 ts;       /* bpf_ktime_get_ns (CLOCK_MONOTONIC) */
	__u32 prev_tid; /* the target thread switched out, or 0 */
	__u32 next_tid; /* the target thread switched in, or 0 */
	__u32 cpu;
	__u32 flags;    /* enum sched_event_flags */
	/* With SCHED_EV_CHARGED: the CPU time the kernel charged the stint
	 * prev_tid ends here (its se.sum_exec_runtime growth, as oncpu_ns).
	 * User space places the stint at [ts - charged_ns, ts]: backdated from
	 * the switch-out, since the kernel may start charging before the
	 * switch-in (see thread_stats.oncpu_ns). */
	__u64 charged_ns;
};

enum sched_event_flags {
	/* charged_ns is known: prev_tid had a counter baseline. Without it
	 * (on a CPU since before the probe attached) the stint is not
	 * counted. */
	SCHED_EV_CHARGED = 1,
	/* prev_tid's switch-out was involuntary: the kernel counted it in
	 * nivcsw (preempted, or yielded still runnable), so it stays on the
	 * run queue; without it the thread blocked (nvcsw). For a switch-out
	 * without a counter baseline, classified from the tracepoint's
	 * arguments as thread_stats.voluntary is. */
	SCHED_EV_PREEMPTED = 2,
};

#endif /* BROKERTRACE_SCHED_H */
