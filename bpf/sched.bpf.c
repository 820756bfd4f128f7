// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * sched: per-thread scheduler accounting for one target process, filtered
 * in the kernel, plus a per-CPU count of every context switch.
 *
 * Voluntary vs involuntary switches are not classified from the
 * sched_switch arguments but taken from the kernel's own counters:
 * __schedule() increments prev->nvcsw or prev->nivcsw just before it fires
 * the tracepoint, and /proc/<pid>/task/<tid>/status prints exactly those two
 * fields. The arguments would be wrong in one case: a task that calls
 * schedule() to block while a signal is pending is not dequeued, the
 * tracepoint reports prev_state = TASK_RUNNING, yet the kernel counts the
 * switch as voluntary (try_to_block_task() rewrites prev_state since Linux
 * 6.13). Reading the counters also keeps the totals exact if a program run
 * is skipped: the next switch-out picks the difference up. The arguments are
 * still compared with the counters (vol_args_invol, invol_args_vol) and used
 * for a thread's first switch-out when it was already on a CPU at attach
 * time.
 *
 * CPU time comes the same way from se.sum_exec_runtime, the field behind
 * /proc/<pid>/task/<tid>/schedstat: its growth between two observations is
 * exact even if the probe missed a switch in between. Such misses happen:
 * on the development VM the programs were not run for about one switch a
 * second (always a switch away from one thread of the VM's init process),
 * though the kernel counted it. A switch-out without a preceding switch-in
 * is counted in missed_ins.
 *
 * On-CPU time (oncpu_ns, and the stint each switch-out event carries) is
 * that growth too, not the clock from sched_switch in to out: the kernel
 * charges a thread woken onto an idle CPU from the wake-up, when the idle
 * CPU's run-queue clock is updated; __schedule then skips the update, so
 * the idle exit, IPI and tick restart before the switch-in are charged to
 * the thread (measured: two threads ping-ponging through pipes on two CPUs
 * ran 27-30% longer by schedstat than from switch-in to switch-out). User
 * space places each stint where it ends, backdated by its charge.
 *
 * Two hook paths with the same logic, chosen by the loader: tp_btf (typed
 * arguments, direct loads) and raw_tp (BPF_CORE_READ) for kernels that
 * refuse tp_btf.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "brokertrace.h"

#include "sched.h"
#include "schedclock.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define TASK_RUNNING 0
#define TASK_DEAD 0x80

/* Target process (tgid), set by the loader before load. 0 matches nothing
 * but the idle tasks, so the loader refuses it. */
const volatile __u32 targ_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct thread_stats);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_stats);
} cpus SEC(".maps");

/* The switch event stream (struct sched_event), on when emit_events is set;
 * with stream_gc_only, only the switch-outs of a JVM's GC and VM threads
 * (gc_comm), for gc_stints.csv, when per-message figures come from the
 * clocks (schedclock.h). */
const volatile bool emit_events = false;
const volatile bool stream_gc_only = false;
/* Wake the reader only each time this much more is waiting (ring_wake); it
 * also polls. */
const volatile __u64 wakeup_bytes = 1 << 20;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* the loader may resize */
} switches SEC(".maps");

/* Make the type visible to bpf2go -type. */
const struct sched_event *unused_sched_event __attribute__((unused));

/* charged: the stint prev_tid ends, or -1 when unknown (no baseline);
 * preempted: prev_tid's switch-out was involuntary. */
static __always_inline void emit_switch(struct cpu_stats *cs, __u64 now, __u32 cpu, __u32 prev_tid,
					__u32 next_tid, __s64 charged, bool preempted)
{
	struct sched_event ev = { .ts = now, .prev_tid = prev_tid, .next_tid = next_tid, .cpu = cpu };
	if (preempted)
		ev.flags = SCHED_EV_PREEMPTED;
	if (charged >= 0) {
		ev.flags |= SCHED_EV_CHARGED;
		ev.charged_ns = charged;
	}
	if (bpf_ringbuf_output(&switches, &ev, sizeof(ev), RING_WAKE(&switches, sizeof(ev))) == 0) {
		if (cs)
			cs->events++;
	} else if (cs) {
		cs->events_dropped++;
	}
}

static __always_inline struct cpu_stats *this_cpu(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cpus, &zero);
}

/*
 * The thread's entry, created on first sight. A full map is counted in
 * cpu_stats.dropped, never silent.
 *
 * One thread's entry is written only under the scheduler's locks for that
 * thread (sched_switch and the wakeups hold its run queue's lock), or by the
 * thread itself while running (sched_process_exit), so plain
 * read-modify-write is safe.
 */
static __always_inline struct thread_stats *thread(__u32 tid)
{
	struct thread_stats *ts = bpf_map_lookup_elem(&threads, &tid);
	if (ts)
		return ts;
	struct thread_stats init = {};
	init.tid = tid;
	/* BPF_NOEXIST: another CPU may have created it meanwhile; look again. */
	bpf_map_update_elem(&threads, &tid, &init, BPF_NOEXIST);
	ts = bpf_map_lookup_elem(&threads, &tid);
	if (!ts) {
		struct cpu_stats *cs = this_cpu();
		if (cs)
			cs->dropped++;
	}
	return ts;
}

/* Take the task's counters as the starting point; they are stable while it
 * is off a CPU. */
static __always_inline void baseline(struct thread_stats *ts, struct task_struct *p, const bool btf)
{
	ts->last_nvcsw = RD(btf, p, nvcsw);
	ts->last_nivcsw = RD(btf, p, nivcsw);
	ts->last_runtime = RD(btf, p, se.sum_exec_runtime);
	ts->flags |= SCHED_TF_BASELINE;
}

/* Returns the CPU time the kernel charged the stint that ends, -1 when it
 * is unknown (no counter baseline, or no map entry), and sets *invol when
 * the switch-out was counted involuntary. */
static __always_inline __s64 switch_out(struct task_struct *prev, bool preempt,
					unsigned int prev_state, __u64 now, __u32 cpu,
					const bool btf, bool *invol)
{
	/* trace_sched_switch fires before context_switch(): current is prev. */
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct thread_stats *ts = thread(tid);
	if (!ts)
		return -1;
	__s64 charged = -1;

	__u64 nv = RD(btf, prev, nvcsw);
	__u64 niv = RD(btf, prev, nivcsw);
	__u64 rt = RD(btf, prev, se.sum_exec_runtime);
	/* The classification the arguments suggest; see the file comment. */
	bool args_vol = !preempt && prev_state != TASK_RUNNING;

	if (ts->flags & SCHED_TF_BASELINE) {
		__u64 dv = nv - ts->last_nvcsw;
		__u64 di = niv - ts->last_nivcsw;
		ts->voluntary += dv;
		ts->involuntary += di;
		*invol = di != 0;
		if (dv && !args_vol)
			ts->vol_args_invol++;
		else if (!dv && args_vol)
			ts->invol_args_vol++;
		/* sum_exec_runtime grows only on a CPU: its change since the
		 * last observation is this stint's CPU time, switch-in seen or
		 * not, and put_prev_task brought it up to date just now. */
		charged = rt - ts->last_runtime;
		ts->cpu_ns += charged;
		ts->oncpu_ns += charged;
		/* Switched out with no switch-in since the last observation:
		 * the probe did not run for it, and the stint's charge stands
		 * in for its clock. */
		if (ts->oncpu_since) {
			ts->clock_ns += now - ts->oncpu_since;
		} else {
			ts->missed_ins++;
			ts->clock_ns += charged;
		}
	} else {
		/* On a CPU since before attach: the counters' previous values are
		 * unknown. The time it ran before this switch is not counted. */
		if (args_vol)
			ts->voluntary++;
		else
			ts->involuntary++;
		*invol = !args_vol;
		ts->guessed++;
		ts->flags |= SCHED_TF_BASELINE;
	}
	ts->last_nvcsw = nv;
	ts->last_nivcsw = niv;
	ts->last_runtime = rt;
	ts->oncpu_since = 0;
	ts->wake_ts = 0;
	/* Still on the run queue: preempted, yielded, or a pending signal
	 * stopped it from blocking (then prev_state is TASK_RUNNING). */
	ts->runnable_ts = (preempt || prev_state == TASK_RUNNING) ? now : 0;
	if (preempt)
		ts->preempted++;
	if (prev_state & TASK_DEAD)
		ts->flags |= SCHED_TF_DEAD;
	ts->cpu = cpu;
	bpf_get_current_comm(ts->comm, sizeof(ts->comm));
	return charged;
}

static __always_inline void switch_in(struct task_struct *next, __u64 now, __u32 cpu,
				      const bool btf)
{
	__u32 tid = RD(btf, next, pid);
	struct thread_stats *ts = thread(tid);
	if (!ts)
		return;

	if (!(ts->flags & SCHED_TF_BASELINE))
		baseline(ts, next, btf); /* not yet running: stable counters */
	if (ts->runnable_ts) {
		ts->preempt_wait_ns += now - ts->runnable_ts;
		ts->preempt_waits++;
	} else if (ts->wake_ts) {
		ts->wait_ns += now - ts->wake_ts;
		ts->waits++;
	}
	ts->runnable_ts = 0;
	ts->wake_ts = 0;
	ts->oncpu_since = now;
	ts->switch_ins++;
	ts->cpu = cpu;
	if (!ts->comm[0])
		bpf_probe_read_kernel_str(ts->comm, sizeof(ts->comm), next->comm);
}

/* clock_switch updates this CPU's slot of the target's clocks (see
 * schedclock.h): prev_t, a target thread ended a stint charged that much
 * (-1: unknown); next_t, one began at now. The new values are worked out
 * first and then published in a few stores, stamped with the time of the
 * publication: a reader asking for an instant before it takes the values
 * before (prev_*), one asking for a later instant the new ones, and only a
 * reader within the stores themselves finds done != at. */
static __always_inline __u64 clock_switch(__u32 cpu, __u64 now, bool prev_t, __s64 charged, bool next_t)
{
	struct sched_clock_slot *s = bpf_map_lookup_elem(&sched_clock, &cpu);
	if (!s)
		return now;
	__u64 outs = s->outs;
	if (prev_t) {
		outs++;
		if (charged >= 0)
			s->cum += charged;
		s->start = 0;
	}
	if (next_t)
		s->start = now;
	__s64 base = s->start ? s->cum - (__s64)s->start : s->cum;
	__u64 word = ((__u64)base << 1) | (s->start ? 1 : 0);
	__u64 at = bpf_ktime_get_ns();
	s->prev_at = s->at;
	s->prev_outs = s->outs;
	s->prev_word = s->word;
	s->at = at;
	s->outs = outs;
	s->word = word;
	s->done = at;
	return at;
}

/* has_prefix: comm begins with the string literal p. Unrolled byte by
 * byte: clang would call memcmp, which BPF has not. */
#define has_prefix(comm, p) prefix_of((comm), (p), sizeof(p) - 1)

static __always_inline bool prefix_of(const char *comm, const char *p, const int n)
{
#pragma unroll
	for (int i = 0; i < SCHED_COMM_LEN - 1; i++) {
		if (i >= n)
			break;
		if (comm[i] != p[i])
			return false;
	}
	return true;
}

/* gc_comm says whether the current thread is one of a HotSpot JVM's that
 * work during stop-the-world pauses, by its comm: recfile.GCThreadKind's
 * rules ("VM Thread", or a parallel GC worker's prefix). */
static __always_inline bool gc_comm(void)
{
	char comm[SCHED_COMM_LEN] = {};
	bpf_get_current_comm(comm, sizeof(comm));
	if (has_prefix(comm, "VM Thread") && comm[9] == 0)
		return true;
	return has_prefix(comm, "GC Thread#") || has_prefix(comm, "ParGC Thread#") ||
	       has_prefix(comm, "GC task thread#") || has_prefix(comm, "Gang worker#");
}

static __always_inline int on_switch(bool preempt, struct task_struct *prev,
				     struct task_struct *next, unsigned int prev_state,
				     const bool btf)
{
	struct cpu_stats *cs = this_cpu();
	if (cs)
		cs->switches++;

	bool prev_t = (bpf_get_current_pid_tgid() >> 32) == targ_tgid;
	bool next_t = (__u32)RD(btf, next, tgid) == targ_tgid;
	if (!prev_t && !next_t)
		return 0;

	__u64 now = bpf_ktime_get_ns();
	__u32 cpu = bpf_get_smp_processor_id();
	__s64 charged = -1;
	bool invol = false;
	if (prev_t) {
		if (cs)
			cs->target_out++;
		charged = switch_out(prev, preempt, prev_state, now, cpu, btf, &invol);
	}
	if (next_t) {
		if (cs)
			cs->target_in++;
		switch_in(next, now, cpu, btf);
	}
	/* The stream stamps the switch when the clocks published it, so
	 * that the two order it alike against the socket probe's calls. */
	__u64 at = clock_switch(cpu, now, prev_t, charged, next_t);
	if (emit_events && !stream_gc_only)
		emit_switch(cs, at, cpu, prev_t ? (__u32)bpf_get_current_pid_tgid() : 0,
			    next_t ? (__u32)RD(btf, next, pid) : 0, charged, invol);
	else if (emit_events && prev_t && gc_comm())
		emit_switch(cs, at, cpu, (__u32)bpf_get_current_pid_tgid(), 0, charged, invol);
	return 0;
}

static __always_inline int on_wakeup(struct task_struct *p, bool new_task, const bool btf)
{
	if ((__u32)RD(btf, p, tgid) != targ_tgid)
		return 0;
	__u32 tid = RD(btf, p, pid);
	struct thread_stats *ts = thread(tid);
	if (!ts)
		return 0;
	ts->wakeups++;
	if (new_task) {
		/* Never ran: its counters are 0 now. A tid that an exited thread
		 * of the target used before keeps that thread's totals and
		 * continues from here. */
		baseline(ts, p, btf);
		ts->flags = (ts->flags & ~(SCHED_TF_EXITED | SCHED_TF_DEAD)) | SCHED_TF_NEW;
		ts->exit_ns = 0;
		ts->oncpu_since = 0;
		ts->runnable_ts = 0;
		bpf_probe_read_kernel_str(ts->comm, sizeof(ts->comm), p->comm);
	} else if (!(ts->flags & SCHED_TF_BASELINE) && !RD(btf, p, on_cpu)) {
		/* Woken off CPU: stable counters. A task woken while still on
		 * its CPU (it had not switched out yet) gets none here. */
		baseline(ts, p, btf);
	}
	/* A wakeup of a task still on its CPU (it set its state but had not
	 * switched out yet) is no run-queue wait; nor is one of a task already
	 * waiting on the run queue. */
	if (!ts->oncpu_since && !ts->runnable_ts && !ts->wake_ts)
		ts->wake_ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int on_exit(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	if ((id >> 32) != targ_tgid)
		return 0;
	struct thread_stats *ts = thread((__u32)id);
	if (!ts)
		return 0;
	ts->exit_ns = bpf_ktime_get_ns();
	ts->flags |= SCHED_TF_EXITED;
	return 0;
}

/* tp_btf path. */

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	return on_switch(preempt, prev, next, prev_state, true);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(wakeup_btf, struct task_struct *p)
{
	return on_wakeup(p, false, true);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(wakeup_new_btf, struct task_struct *p)
{
	return on_wakeup(p, true, true);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(exit_btf)
{
	return on_exit();
}

/*
 * Kernels before 5.18 pass sched_switch no prev_state: the programs below
 * take the three arguments those kernels pass and read the state the
 * tracepoint would have reported from the task (its __state, state before
 * 5.14), which is what the tracepoint read itself; a preempted task is
 * reported running, as there. The loader takes them where the kernel's BTF
 * gives the tracepoint three arguments.
 */
struct task_struct___state {
	unsigned int __state;
} __attribute__((preserve_access_index));

struct task_struct___old {
	long state;
} __attribute__((preserve_access_index));

static __always_inline unsigned int task_state(struct task_struct *p, bool preempt)
{
	if (preempt)
		return TASK_RUNNING;
	if (bpf_core_field_exists(struct task_struct___state, __state))
		return BPF_CORE_READ((struct task_struct___state *)p, __state);
	return BPF_CORE_READ((struct task_struct___old *)p, state);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_btf_3, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(preempt, prev, next, task_state(prev, preempt), true);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(switch_raw_3, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(preempt, prev, next, task_state(prev, preempt), false);
}

/* raw_tp path: same arguments, untrusted pointers. */

SEC("raw_tp/sched_switch")
int BPF_PROG(switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	return on_switch(preempt, prev, next, prev_state, false);
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(wakeup_raw, struct task_struct *p)
{
	return on_wakeup(p, false, false);
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(wakeup_new_raw, struct task_struct *p)
{
	return on_wakeup(p, true, false);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(exit_raw)
{
	return on_exit();
}

/* The floor for benchmarks: what any tp_btf program on sched_switch costs. */
SEC("tp_btf/sched_switch")
int BPF_PROG(switch_empty)
{
	return 0;
}
