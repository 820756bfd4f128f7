/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The target's scheduler clocks, kept by bpf/sched.bpf.c and read by
 * bpf/sockio.bpf.c, which stamps them into its events: per message, the
 * target's switch-outs and on-CPU time between its read and its write are
 * then two subtractions, and the scheduler probe need not ship every
 * switch to user space for it (3.5-4 switches a message at nats-server's
 * rates, most of brokertrace's own CPU).
 *
 * One slot per CPU, written only by that CPU's sched_switch (interrupts
 * off, under its run queue's lock); any CPU reads every slot. What others
 * read is one 64-bit word per quantity, each a single aligned store, so a
 * reader sees the slot before or after a switch, never half of one:
 *
 *   outs: target switch-outs on this CPU so far;
 *   word: (base << 1) | running, where running says a target thread is on
 *         this CPU (switched in while the probe watched), and the CPU's
 *         on-CPU time of target threads at time t is base + running * t:
 *         base is the charge of the stints it ended, less the switch-in
 *         time of the one running.
 *
 * A stint counts from its switch-in by the clock until its switch-out,
 * which replaces that by what the kernel charged (se.sum_exec_runtime's
 * growth, as thread_stats.oncpu_ns): a read during a stint sees its clock
 * so far, a read after it its charge. Stints without a known charge (the
 * thread was on a CPU when the probe attached) count neither.
 */
#ifndef BROKERTRACE_SCHEDCLOCK_H
#define BROKERTRACE_SCHEDCLOCK_H

/* Slots read at most: the loaders use the clocks only on machines with at
 * most this many possible CPUs (else the switch stream, as before). */
#define SCHED_CLOCK_MAX_CPUS 512

struct sched_clock_slot {
	__u64 outs; /* read by any CPU */
	__u64 word; /* read by any CPU: (base << 1) | running */
	__u64 at;   /* read by any CPU: when the last change of outs and word was published */
	__u64 done; /* read by any CPU: equal to at once that change is written */
	/* outs, word and at before that change: a reader that wants the
	 * clocks at an instant before at (a write's, whose events are sent
	 * after its scan) takes these. */
	__u64 prev_outs;
	__u64 prev_word;
	__u64 prev_at;
	__s64 cum;   /* this CPU's only: charges of the stints it ended */
	__u64 start; /* this CPU's only: switch-in of the running target stint, or 0 */
};

/* Array indexed by CPU; the loader sizes it to the possible CPUs and
 * shares the scheduler probe's with the socket probe. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sched_clock_slot);
} sched_clock SEC(".maps");

#endif /* BROKERTRACE_SCHEDCLOCK_H */
