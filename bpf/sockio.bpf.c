// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * sockio: find message markers in the bytes a target process moves through
 * its TCP sockets, without letting payload bytes leave the kernel.
 *
 * Two hook paths, chosen by the loader:
 *
 *  - sock: tp_btf on sock:sock_recv_length / sock:sock_send_length (Linux
 *    6.3+). They fire only for socket I/O, after the data was copied to or
 *    from the user's buffers. The buffers themselves are found through the
 *    system call's arguments in the task's saved user registers
 *    (bpf_task_pt_regs), so no system-call hook is needed and processes that
 *    do no socket I/O pay nothing. recvmmsg/sendmmsg are left to perf
 *    tracepoints on those two system calls' exits (only they pay), where
 *    every message's length is known.
 *
 *  - syscalls: raw_tp on raw_syscalls:sys_exit, for older kernels. Every
 *    system call of every process pays for the hook; the program returns at
 *    once for other processes and other system calls, and resolves the file
 *    descriptor to its socket itself.
 *
 * Both end in scan_call(), which walks the call's buffers (one buffer or an
 * iovec array) in chunks, copies each chunk into a per-CPU scratch buffer,
 * and scans it for words that can lie inside a marker. Markers split across
 * chunks, iovecs or calls are found through a per-socket carry of the last
 * bytes that could begin a marker.
 *
 * The walk has no fixed cap: it runs under bpf_loop (Linux 5.17+), which
 * takes up to 8M iterations at one verification of its body. Kernels without
 * bpf_loop (only the syscalls path can run there) load sys_exit_bounded
 * instead, whose walk stops after MAX_STEPS steps; what that leaves is
 * counted, per size class of call, with the markers it held.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "brokertrace.h"
#include "sockio.h"
#include "schedclock.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before the program is loaded. */
const volatile __u32 targ_tgid = 0;
const volatile __u32 scan_limit = 0xffffffff; /* bytes scanned per call at most (an optional cap) */
/* Wake the reader only each time this much more is waiting (ring_wake); it
 * also polls on a short timer. A wake-up per record (the default) costs the
 * traced call about a microsecond and the reader a context switch per event. */
const volatile __u64 wakeup_bytes = 1 << 20;
/* enum bt_match: markers (the default) or protocol frames (frame.bpf.h). A
 * constant, so that the verifier drops the mode not asked for. */
const volatile __u32 match_mode = BT_MATCH_MARKER;
/* frame_protos: the protocols of frame_ports, bit 1 << enum bt_proto each.
 * A constant, so that the verifier walks the byte loop's parsers of these
 * only: verifying all five took each of the four scanning programs 1.2 to
 * 1.4 s on Linux 6.18, where one broker speaks one or two. */
const volatile __u32 frame_protos = 0;

/* Room in front of a chunk: the carried bytes, up to 24, end at HEAD, and
 * at least STRIDE - 1 bytes before them, so that the search around a
 * candidate word never reaches before the buffer. */
#define HEAD 32
/*
 * Every load from the scratch buffer at a computed offset goes through
 * AT(), which masks the offset with BUF_MASK in an instruction clang cannot
 * drop. The mask changes no offset the scan computes (they all lie below
 * it); it is there for the verifier, which then knows the load is in
 * bounds from the mask alone. Verifiers before Linux 6.8 lose or corrupt
 * the bounds that comparisons give a register (a comparison with a constant
 * on its left is neither predicted nor used on 5.10-6.1, and its dead branch
 * is walked with min > max); a bound that comes from a mask survives every
 * version from 5.10 on. The buffer holds BUF_SLACK bytes past the mask, so
 * that a masked offset plus a constant up to 56 stays inside. A per-CPU
 * value is at most 32 KiB, so the mask is 16 KiB - 1 and a chunk what fits
 * below it with the room in front.
 */
#define BUF_MASK 16383
#define BUF_SLACK 64
#define SCAN_CHUNK (BUF_MASK + 1 - HEAD - 32) /* bytes copied and scanned per step */
#define MAX_IOV 1024    /* iovec entries examined per call: IOV_MAX */
#define MAX_MMSG 1024   /* mmsghdr entries per recvmmsg/sendmmsg: UIO_MAXIOV */
#define IOV_BATCH 16    /* iovec entries read from user memory at once */
#define MAX_STEPS 1280  /* steps per call of the bounded walk (no bpf_loop) */
/* Steps per call under bpf_loop: a call moves < 2^31 bytes, which take at
 * most 2^17 chunks, plus two steps per iovec entry; so never binding. */
#define LOOP_STEPS (1 << 18)
#define BUF_SIZE (BUF_MASK + 1 + BUF_SLACK)
#define NEV 8 /* events staged per call before the first is sent */
/* Chunks of up to SMALL bytes are scanned without calls to scan_words;
 * calls of up to EAGER_TS bytes read the clock only when they carry a
 * marker (see start_call). */
#define SMALL 1024
#define EAGER_TS 1024

/* The scan loads one 8-byte word every STRIDE bytes. A marker is 20 bytes,
 * so whatever its offset one of those words lies wholly inside it when
 * STRIDE <= 13; and every byte of a marker is in 0x30..0x66 ("BTID", 0-9,
 * a-f). A word with a byte outside that range cannot be inside a marker. */
#define STRIDE 13
#define UNROLL 4
#define BLOCK (STRIDE * UNROLL)
#define SUB_BLOCKS 40 /* blocks per scan_words call */
#define NSUB ((HEAD + SCAN_CHUNK) / (BLOCK * SUB_BLOCKS) + 1)
#define SMALL_BLOCKS ((BT_CARRY_MAX + SMALL) / BLOCK + 1)
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define MSG_PEEK 0x2
#define MSG_TRUNC 0x20
#define MSG_ERRQUEUE 0x2000
#define PF_IO_WORKER 0x00000010
#define PF_KTHREAD 0x00200000
/* UAPI values the trimmed vmlinux.h leaves out. */
#define BPF_MAP_TYPE_SK_STORAGE 24
#define BPF_F_NO_PREALLOC 1
#define BPF_SK_STORAGE_GET_F_CREATE 1

/* System call numbers (each architecture's ABI; fixed) and where a call's
 * number and arguments are in its saved registers (struct pt_regs of
 * vmlinux.h, one per architecture). SC_*(r) read them through a pointer the
 * verifier knows as the kernel's struct pt_regs (bpf_task_pt_regs);
 * SC_*_CORE(r) through any other pointer (the raw_tp's argument). bpf2go
 * defines __TARGET_ARCH_arm64 or __TARGET_ARCH_x86 for each object. */
#if defined(__TARGET_ARCH_arm64)
/* include/uapi/asm-generic/unistd.h */
#define NR_read 63
#define NR_write 64
#define NR_readv 65
#define NR_writev 66
#define NR_sendto 206
#define NR_recvfrom 207
#define NR_sendmsg 211
#define NR_recvmsg 212
#define NR_recvmmsg 243
#define NR_sendmmsg 269
#define NR_preadv2 286
#define NR_pwritev2 287
#define NR_sendfile 71
#define NR_splice 76
/* Arguments in x0..x5; x0 holds the return value by the call's exit, so
 * the first argument is orig_x0. */
#define SC_NR(r) ((r)->syscallno)
#define SC_ARG1(r) ((r)->orig_x0)
#define SC_ARG2(r) ((r)->regs[1])
#define SC_ARG3(r) ((r)->regs[2])
#define SC_ARG4(r) ((r)->regs[3])
#define SC_NR_CORE(r) BPF_CORE_READ(r, syscallno)
#define SC_ARG1_CORE(r) BPF_CORE_READ(r, orig_x0)
#define SC_ARG2_CORE(r) BPF_CORE_READ(r, regs[1])
#define SC_ARG3_CORE(r) BPF_CORE_READ(r, regs[2])
#define SC_ARG4_CORE(r) BPF_CORE_READ(r, regs[3])
#else
/* arch/x86/entry/syscalls/syscall_64.tbl */
#define NR_read 0
#define NR_write 1
#define NR_readv 19
#define NR_writev 20
#define NR_sendto 44
#define NR_recvfrom 45
#define NR_sendmsg 46
#define NR_recvmsg 47
#define NR_recvmmsg 299
#define NR_sendmmsg 307
#define NR_preadv2 327
#define NR_pwritev2 328
#define NR_sendfile 40
#define NR_splice 275
/* The system call ABI: di, si, dx, r10 (not cx), r8, r9. */
#define SC_NR(r) ((r)->orig_ax)
#define SC_ARG1(r) ((r)->di)
#define SC_ARG2(r) ((r)->si)
#define SC_ARG3(r) ((r)->dx)
#define SC_ARG4(r) ((r)->r10)
#define SC_NR_CORE(r) BPF_CORE_READ(r, orig_ax)
#define SC_ARG1_CORE(r) BPF_CORE_READ(r, di)
#define SC_ARG2_CORE(r) BPF_CORE_READ(r, si)
#define SC_ARG3_CORE(r) BPF_CORE_READ(r, dx)
#define SC_ARG4_CORE(r) BPF_CORE_READ(r, r10)
#endif

/*
 * --match frame: one direction of one connection's protocol parser (the
 * kernel side of package frame; docs/frame-matching.md). It lives in the
 * map frames between calls and in the call's scan_ctx while the call is
 * parsed. held is a record whose payload ended but whose trailer (CRLF)
 * was not checked yet: a one-marker event, its header that of the call
 * holding the payload's last byte, sent as it is once a later call brings
 * the trailer.
 */
struct fstate {
	__u64 pos;    /* stream offset of the next byte (exact only from a fresh connection) */
	__u64 fp[4];  /* the payload's fingerprint lanes over its whole words so far */
	__u64 pw;     /* the partial word: the last pn bytes of the payload so far */
	__u64 subj;   /* FNV-1a of the subject */
	__u64 word;   /* the verb's bytes, upper-cased, shifted in */
	__u64 num[2]; /* the last two fields as sizes: num[1] the last */
	__u64 key2;   /* STOMP: the 8 bytes of the command or key before word's (see st_shift) */
	__u32 skip;   /* bytes to skip before the payload (NATS headers) */
	__u32 remain; /* payload bytes left to hash */
	__u32 len;    /* payload bytes hashed */
	__u32 line;   /* bytes of the control line so far */
	__u32 rstack[8]; /* Redis: elements left in each open aggregate, outermost first */
	__u32 rsize;  /* Redis: elements of the top-level aggregate */
	__u32 ridx;   /* ... and the one being read */
	__u32 abody;  /* AMQP: body bytes of the content still to come */
	__u16 achan;  /* AMQP: the content's channel */
	__u16 aleft;  /* AMQP: bytes of the content method's arguments left */
	__u16 acount; /* AMQP: bytes left in the argument being read */
	__u8 aflags;  /* AMQP: A_* */
	__u8 aphase;  /* AMQP: enum amqp_phase */
	__u8 state;   /* enum fstate_st */
	__u8 flags;   /* FF_* */
	__u8 field;   /* fields of the line begun so far (the verb is 1) */
	__u8 vlen;    /* bytes of the verb */
	__u8 proto;   /* enum bt_proto */
	__u8 dir;
	__u8 tls;     /* bytes of a TLS record header matched at the in stream's start; 0xff: none */
	__u8 pn;      /* bytes in pw (0..7) */
	__u8 nw;      /* whole words of the payload so far, mod 4: the next word's lane */
	__u8 mqv;     /* MQTT: the protocol level of the connection's CONNECT (0: not seen) */
	__u8 fixed;   /* MQTT: bytes of the packet's fixed header */
	__u8 sflags;  /* STOMP: ST_* of the frame's header */
	__u8 rdepth;  /* Redis: open aggregates */
	__u8 rtype;   /* Redis: the type byte of the element's line */
	__u8 rflags;  /* Redis: R_* */
	__u8 after_payload; /* the state after a message's payload: its trailer's */
	__u8 after_skip;    /* the state after bytes skipped (MQTT: the next packet) */
	__u8 held[__builtin_offsetof(struct bt_event, markers) + sizeof(struct bt_marker)] __attribute__((aligned(8)));
};

/* The target's scheduler clocks as take_stamp sums them. */
struct sched_stamp {
	__u64 outs;
	__s64 base;
	__u32 running;
	__u32 raced; /* CPUs whose clocks at the instant asked for were not to be had */
	__u32 cpu;   /* take_stamp's map key */
	__u32 _pad;
};

/* Per-CPU working state of the call being scanned. These programs never run
 * interleaved on one CPU: the sock tracepoints run with preemption off, and
 * the kernel skips (and counts, reported by the loader) a run of a program
 * that would nest in itself. So one slot per CPU is enough, and the per-CPU
 * counters need no atomic operations. */
struct scan_ctx {
	__u8 buf[BUF_SIZE] __attribute__((aligned(8)));
	__u64 carry[3];  /* last bytes of the stream so far, right-aligned */
	__u32 nev;       /* index of the event markers go to now */
	__u32 found;     /* markers found in this call */
	__u32 carry_len; /* how many of them may begin a marker (0..19) */
	__u32 seg_base;  /* offset of the current chunk within the call's bytes */
	/* Walk over the call's buffers, advanced by scan_step(). */
	__u64 iov;       /* user address of the iovec array (vectored calls) */
	__u64 iovcnt;    /* its length */
	__u64 ptr;       /* user address of the next byte to scan */
	__u64 left;      /* bytes left in the current buffer */
	__u64 mmsg;      /* recvmmsg/sendmmsg: user address of the mmsghdr array */
	__u32 mcnt;      /* its entries that moved bytes (the call's result) */
	__u32 midx;      /* next entry */
	__u32 msg_left;  /* bytes left in the current message (the call's, or an mmsg entry's) */
	__u32 remaining; /* bytes left to scan in the call */
	__u32 done;      /* bytes scanned so far */
	__u32 iov_idx;   /* next iovec entry */
	__u32 batch_at;  /* index of iovs[0] in the user's iovec array */
	__u32 batch_len; /* entries in iovs */
	struct bt_iovec iovs[IOV_BATCH];
	__u32 fault;     /* user memory could not be read */
	/* The call's events, sent when the scan ends so that they carry its
	 * end time; only a call with more than NEV * BT_MAX_MARKERS markers
	 * sends some earlier. */
	struct bt_event ev[NEV];
	/* --match frame: the socket's parser for this call, and whether the
	 * call's header is filled (fill_header) and the call found TLS. */
	struct fstate fs;
	/* The scheduler's clocks at the call's time (stamp_events). */
	struct sched_stamp stamp;
	__u64 f_at, f_end; /* frame_bytes's run */
	__u32 runs_full;   /* frame_runs stopped at FRAME_RUNS, not where runs end */
	struct bt_user_msghdr mh; /* classify: a recvmsg/sendmsg's msghdr */
	__u32 filled;
	__u32 tls_found;
	__u32 mqv_found; /* MQTT: the level of a CONNECT this call read, for the out direction */
};

struct carry_key {
	__u64 sock;
	__u32 dir;
	__u32 _pad;
};

struct carry_val {
	__u64 bytes[3];
	__u32 len;
	__u32 lru; /* sock path: an mmsg call left the carry in the map carries */
};

struct carry_pair {
	struct carry_val v[2]; /* [dir] */
};

/* recvmmsg/sendmmsg's array entry (struct mmsghdr: a user_msghdr, then the
 * bytes the message moved); its layout is the system-call ABI. */
struct bt_mmsghdr {
	struct bt_user_msghdr hdr;
	__u64 msg_control;
	__u64 msg_controllen;
	__u32 msg_flags;
	__u32 _pad;
	__u32 msg_len;
	__u32 _pad2;
};

/* The context of a perf tracepoint syscalls:sys_exit_* (its format file). */
struct bt_sys_exit_ctx {
	__u64 _common;
	__s32 nr;
	__s32 _pad;
	__s64 ret;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scan_ctx);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bt_stats);
} stats SEC(".maps");

/* Partial markers waiting for the rest of their bytes, per socket and
 * direction. Only sockets whose last bytes could begin a marker have an
 * entry, so the map stays small; LRU keeps a socket that vanished mid-marker
 * from pinning an entry. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct carry_key);
	__type(value, struct carry_val);
} carries SEC(".maps");

/* The sock path's carries, in each socket's own storage (see find_carry). */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct carry_pair);
} sk_carries SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* the loader may resize */
} events SEC(".maps");

/* The field of struct sock that holds its BPF storage (vmlinux.h leaves it
 * out); CO-RE finds it in the kernel's struct sock. */
struct sock___storage {
	void *sk_bpf_storage;
} __attribute__((preserve_access_index));

/* Make the types visible to bpf2go -type. */
const struct bt_event *unused_event __attribute__((unused));
const struct bt_stats *unused_stats __attribute__((unused));

static __always_inline struct scan_ctx *get_ctx(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&scratch, &zero);
}

static __always_inline struct bt_stats *get_stats(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&stats, &zero);
}

/* MASK is v & m in an instruction of its own, which clang cannot drop
 * even where it knows the mask changes nothing: the verifier knows the
 * result's bound from it (see BUF_MASK). */
#define MASK(v, m)                                          \
	({                                                  \
		__u64 __v = (v);                            \
		asm volatile("%0 &= %1" : "+r"(__v) : "i"(m)); \
		__v;                                        \
	})

static __always_inline __u64 masked(__u64 o)
{
	return MASK(o, BUF_MASK);
}

/* AT is the address of buf[o] for an offset o < BUF_MASK computed at run
 * time; k a constant of at most BUF_SLACK - 8. */
#define AT(o, k) (&c->buf[masked(o) + (k)])

/* How many slots of the scheduler probe's clocks (schedclock.h) to read:
 * its possible CPUs, or 0 when no scheduler probe shares them. */
const volatile __u32 clock_cpus = 0;

/* take_stamp sums the scheduler clocks' slots into st as they were at t,
 * an instant of this call: a slot changed since (a switch on another CPU
 * during the scan) gives its values before the change. Inlined: a call
 * would be one frame too deep under the frame parsers. Every value,
 * the map key included, lives in st (map memory), not on the stack: the
 * programs' frames together are at the verifier's 512-byte bound on the
 * syscall path. clock_cpus is a constant to the verifier, so it walks the
 * loop that many times. */
static __always_inline void take_stamp(struct sched_stamp *st, __u64 t)
{
	st->outs = 0;
	st->base = 0;
	st->running = 0;
	st->raced = 0;
	for (__u32 i = 0; i < SCHED_CLOCK_MAX_CPUS; i++) {
		if (i >= clock_cpus)
			break;
		st->cpu = i;
		struct sched_clock_slot *s = bpf_map_lookup_elem(&sched_clock, &st->cpu);
		if (!s)
			break;
		__u64 at = *(volatile __u64 *)&s->at;
		if (at <= t) {
			__u64 w = *(volatile __u64 *)&s->word;
			st->outs += *(volatile __u64 *)&s->outs;
			st->base += (__s64)w >> 1;
			st->running += w & 1;
			if (*(volatile __u64 *)&s->done != at)
				st->raced++; /* read within the stores of a publication */
		} else {
			__u64 w = *(volatile __u64 *)&s->prev_word;
			st->outs += *(volatile __u64 *)&s->prev_outs;
			st->base += (__s64)w >> 1;
			st->running += w & 1;
			if (*(volatile __u64 *)&s->prev_at > t)
				st->raced++; /* changed twice since t */
		}
	}
}

/* stamp_events puts the scheduler's clocks at the call's time into its
 * staged events: a write's, taken when its time was (start_call), a
 * read's now, now being its time (the end of its scan). */
static __always_inline void stamp_events(struct scan_ctx *c, __u64 now)
{
	if (!clock_cpus)
		return;
	struct sched_stamp *st = &c->stamp;
	if (c->ev[0].dir == BT_DIR_IN)
		take_stamp(st, now);
	for (__u32 i = 0; i < NEV; i++) {
		struct bt_event *e = &c->ev[i];
		if (i > c->nev)
			break;
		e->sched_outs = st->outs;
		e->sched_base = st->base;
		e->sched_running = st->running;
	}
	c->ev[0].flags |= st->raced ? BT_EV_STAMPED | BT_EV_RACED : BT_EV_STAMPED;
}

/* flush_events sends the events of this call staged so far, stamped with
 * the time since the call's bytes were handed over. more: the call goes on. */
static __always_inline void flush_events(struct scan_ctx *c, struct bt_stats *st, bool more)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 scan_ns = now - c->ev[0].ts_ns;
	stamp_events(c, now);
	for (__u32 i = 0; i < NEV; i++) {
		struct bt_event *e = &c->ev[i];
		__u32 n = e->nr_markers;
		if (i > c->nev || n == 0)
			break;
		if (n > BT_MAX_MARKERS)
			n = BT_MAX_MARKERS;
		e->scan_ns = scan_ns;
		e->flags = c->ev[0].flags & (BT_EV_TRUNCATED | BT_EV_STAMPED | BT_EV_RACED);
		if (more || i < c->nev)
			e->flags |= BT_EV_MORE;
		__u64 size = __builtin_offsetof(struct bt_event, markers) + n * sizeof(struct bt_marker);
		/* Each record's own crossing (no sum kept: the stack is at its
		 * bound on the syscalls path of Linux 6.1). */
		if (bpf_ringbuf_output(&events, e, size, RING_WAKE(&events, size)) == 0) {
			st->events += 1;
		} else {
			st->dropped_events += 1;
			st->dropped_markers += n;
		}
		e->nr_markers = 0;
	}
	c->nev = 0;
}

/*
 * fill_header completes the first event's header once the call turns out
 * to carry a marker: most calls carry none, and they are spared the reads.
 * The socket is the call's, alive until it returns, so reading it here
 * gives what reading it at the hook would.
 */
static __always_inline void fill_header(struct scan_ctx *c)
{
	struct bt_event *e = &c->ev[0];
	if (e->ts_ns == 0)
		e->ts_ns = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	e->pid = id >> 32;
	e->tid = (__u32)id;
	struct sock *sk = (struct sock *)e->sock;
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	e->seq_end = e->dir == BT_DIR_IN ? BPF_CORE_READ(tp, copied_seq) : BPF_CORE_READ(tp, write_seq);
	e->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	e->rport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
}

static __always_inline int hexval(__u8 ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* stage_marker adds a marker (or, matching by frame, a message record) to
 * the call's events: to the current event, else to the next one with the
 * same header, else after sending the events staged so far. */
static __always_inline void stage_marker(struct scan_ctx *c, struct bt_stats *st, __u64 id, __u32 end, __u32 len)
{
	__u32 i = MASK(c->nev, NEV - 1);
	__u32 k = c->ev[i].nr_markers;
	if (k >= BT_MAX_MARKERS) {
		if (i < NEV - 1) {
			/* The next event: the same call, the same header. */
			__u32 n = MASK(i + 1, NEV - 1);
			__builtin_memcpy(&c->ev[n], &c->ev[i], __builtin_offsetof(struct bt_event, markers));
			c->nev = i = n;
		} else {
			flush_events(c, st, true);
			i = 0;
		}
		c->ev[i].nr_markers = 0;
		k = 0;
	}
	i = MASK(i, NEV - 1);
	k = MASK(k, BT_MAX_MARKERS - 1);
	c->ev[i].markers[k].id = id;
	c->ev[i].markers[k].end = end;
	c->ev[i].markers[k].len = len;
	c->ev[i].nr_markers = k + 1;
	c->found += 1;
}

/*
 * try_marker checks for a marker starting at buf[p] (the caller saw a 'B'
 * there and p + 20 <= end) and records it. A global function: the verifier
 * checks it once instead of at every call site in the unrolled scan loop.
 */
__noinline int try_marker(__u64 p)
{
	struct scan_ctx *c = get_ctx();
	struct bt_stats *st = get_stats();
	if (!c || !st)
		return 0;
	if (p > HEAD + SCAN_CHUNK - BT_MARKER_LEN)
		return 0;
	const __u8 *m = AT(p, 0);
	/* "BTID" as a little-endian u32. */
	if (*(__u32 *)m != 0x44495442)
		return 0;
	__u64 id = 0;
	for (int i = 0; i < 16; i++) {
		int v = hexval(m[4 + i]);
		if (v < 0)
			return 0;
		id = (id << 4) | v;
	}
	if (c->found == 0)
		fill_header(c);
	stage_marker(c, st, id, c->seg_base + p + BT_MARKER_LEN - HEAD, 0);
	st->markers[c->ev[0].dir & 1] += 1;
	return 1;
}

/* load64 reads 8 bytes at any offset in one instruction (x86 loads
 * unaligned words at full speed); a plain C load at an odd offset is split
 * by clang into eight byte loads. */
static __always_inline __u64 load64(const void *p)
{
	__u64 v;
	asm volatile("%0 = *(u64 *)(%1 + 0)" : "=r"(v) : "r"(p));
	return v;
}


/* zero_bytes flags bit 7 of each byte of x that is 0. The lowest flag is
 * exact; a flag above a zero byte may be wrong (a borrow), which neither
 * "is there one" nor frame.bpf.h's first_flag (the lowest) looks at. */
static __always_inline __u64 zero_bytes(__u64 x)
{
	return (x - ONES) & ~x & HIGHS;
}

/* has_b: whether a byte of x is a 'B'. */
static __always_inline bool has_b(__u64 x)
{
	return zero_bytes(x ^ ('B' * ONES));
}

/*
 * check_cand looks for markers around a candidate word at buf[w]: one that
 * holds it begins at w - 12 .. w, with its 'B' there. The rare path of the
 * scan, out of line so the scan loop stays short for the verifier (and the
 * instruction cache). Bytes past end are stale; only markers that end by
 * end are accepted.
 */
__noinline int check_cand(__u64 w, __u64 start, __u64 end)
{
	struct scan_ctx *c = get_ctx();
	if (!c || w < STRIDE - 1 || w > HEAD + SCAN_CHUNK)
		return 0;
	__u64 from = w - (STRIDE - 1);
	const __u8 *b = AT(from, 0);
	/* The 13 bytes from `from` lie in the two words at from and from + 8. */
	if (!has_b(load64(b)) && !has_b(load64(b + 8)))
		return 0;
	for (__u32 j = 0; j < STRIDE; j++) {
		__u64 p = from + j;
		if (b[j] == 'B' && p >= start && p + BT_MARKER_LEN <= end)
			try_marker(p);
	}
	return 0;
}

/* far: zero when every byte of x is in 0x30..0x66, the bytes of a marker.
 * x - 0x30 per byte borrows only from a byte below 0x30, and x + 0x19 per
 * byte carries only out of a byte above 0x66: the lowest byte out of range
 * is therefore always flagged, so a word with one is never taken for a
 * candidate. Other bytes' flags may be wrong, which does not matter. */
static __always_inline __u64 far(__u64 x)
{
	return ((x - 0x30 * ONES) | (x + 0x19 * ONES)) & HIGHS;
}

/* cand_bit has bit 63 set when x is a candidate: far(x) >> 7 is at most
 * 0x0101010101010101, so subtracting 1 sets bit 63 only when it is 0. */
static __always_inline __u64 cand_bit(__u64 x)
{
	return (far(x) >> 7) - 1;
}

#define LOAD(o, k) load64(AT(o, k))

/* check_block checks the words at o, o + STRIDE, ... (UNROLL of them, those
 * that end by end) one by one: the block held a candidate, or it is the
 * tail of a chunk. */
__noinline int check_block(__u64 o, __u64 start, __u64 end)
{
	struct scan_ctx *c = get_ctx();
	if (!c)
		return 0;
	for (__u32 j = 0; j < UNROLL; j++) {
		__u64 w = o + j * STRIDE;
		if (w + 8 > end)
			break;
		/* Text holds many candidate words (runs of digits) and few 'B's:
		 * look for one before calling out. Every w is at least STRIDE - 1
		 * (a scan starts there at least; see stage). */
		if (far(LOAD(w, 0)) == 0 &&
		    (has_b(LOAD(w - (STRIDE - 1), 0)) || has_b(LOAD(w - (STRIDE - 1), 8))))
			check_cand(w, start, end);
	}
	return 0;
}

/* block_has_b: whether any of the bytes a marker holding one of the block
 * at o can begin at, buf[o - 12 .. o + 39], is a 'B'. Seven word loads and
 * a few operations: text holds many candidate words (runs of digits and
 * a-f) and few 'B's, and a call out costs more than this. */
static __always_inline bool block_has_b(struct scan_ctx *c, __u64 o)
{
	const __u8 *p = AT(o - (STRIDE - 1), 0);
	__u64 b = 0;
	for (__u32 k = 0; k < 7; k++) {
		__u64 v = load64(p + 8 * k) ^ ('B' * ONES);
		b |= (v - ONES) & ~v;
	}
	return b & HIGHS;
}

/* scan_blocks scans up to n blocks of UNROLL words, STRIDE bytes apart, from
 * buf[o], as long as a whole block ends by end, and checks the blocks that
 * hold a candidate word. Returns where it stopped. */
static __always_inline __u64 scan_blocks(struct scan_ctx *c, __u64 o, __u64 start, __u64 end, __u32 n)
{
	for (__u32 i = 0; i < n; i++) {
		if (o + BLOCK - STRIDE + 8 > end)
			break;
		const __u8 *b = AT(o, 0);
		__u64 m = cand_bit(load64(b)) | cand_bit(load64(b + STRIDE)) | cand_bit(load64(b + 2 * STRIDE)) |
			  cand_bit(load64(b + 3 * STRIDE));
		if ((__s64)m < 0 && block_has_b(c, o))
			check_block(o, start, end);
		o += BLOCK;
	}
	return o;
}

/*
 * scan_words scans up to SUB_BLOCKS blocks from buf[o]. A global function,
 * so that the verifier walks its loop once, whatever the chunk's size; one
 * branch per block keeps that walk short.
 */
__noinline __u64 scan_words(__u64 o, __u64 start, __u64 end)
{
	struct scan_ctx *c = get_ctx();
	if (!c)
		return o;
	return scan_blocks(c, o, start, end, SUB_BLOCKS);
}

/* scan_tail checks the words from o on that end by end: fewer than a block.
 * The call out happens only when one of them is a candidate. */
static __always_inline void scan_tail(struct scan_ctx *c, __u64 o, __u64 start, __u64 end)
{
	__u64 m = 0;
	for (__u32 j = 0; j < UNROLL; j++) {
		__u64 w = o + j * STRIDE;
		if (w + 8 > end)
			break;
		m |= cand_bit(LOAD(w, 0));
	}
	if ((__s64)m < 0)
		check_block(o, start, end);
}

/* carry_len_at returns how many of the bytes buf[start..end) at its end
 * could begin a marker. Only the last 'B' can: no later marker byte is a 'B'. */
static __always_inline __u32 carry_len_at(struct scan_ctx *c, __u32 start, __u32 end)
{
	for (__u32 k = 1; k <= BT_CARRY_MAX; k++) {
		if (k > end || end - k < start)
			return 0;
		const __u8 *b = AT(end - k, 0);
		if (b[0] != 'B')
			continue;
		/* Check the bytes after the 'B' against "TID" + hex digits. */
		for (__u32 i = 1; i < k; i++) {
			__u8 ch = b[i];
			if ((i == 1 && ch != 'T') || (i == 2 && ch != 'I') || (i == 3 && ch != 'D') ||
			    (i >= 4 && hexval(ch) < 0))
				return 0;
		}
		return k;
	}
	return 0;
}

/* stage puts the carried bytes in front of buf[HEAD] and copies len bytes
 * of user memory behind them. Returns where the scan starts (the carried
 * bytes that may begin a marker), or -1 when the memory could not be read. */
static __always_inline long stage(struct scan_ctx *c, __u64 uptr, __u32 len)
{
	*(__u64 *)&c->buf[HEAD - 24] = c->carry[0];
	*(__u64 *)&c->buf[HEAD - 16] = c->carry[1];
	*(__u64 *)&c->buf[HEAD - 8] = c->carry[2];
	if (bpf_probe_read_user(&c->buf[HEAD], len, (void *)uptr) < 0) {
		c->carry_len = 0;
		return -1;
	}
	__u32 cl = c->carry_len;
	if (cl > BT_CARRY_MAX)
		cl = BT_CARRY_MAX;
	return HEAD - cl;
}

/* carry_tail keeps the last 24 bytes of buf[start..end) as the carry, with
 * how many of them may begin a marker. The rare path of keep_tail, out of
 * line so that the verifier checks its loops once. */
__noinline int carry_tail(__u64 start, __u64 end)
{
	struct scan_ctx *c = get_ctx();
	if (!c || end < 24)
		return 0;
	const __u8 *b = AT(end - 24, 0);
	c->carry[0] = load64(b);
	c->carry[1] = load64(b + 8);
	c->carry[2] = load64(b + 16);
	c->carry_len = carry_len_at(c, start, end);
	return 0;
}

/* keep_tail sets the carry: the last bytes of buf[start..end) when a marker
 * may begin in the last 19, which needs a 'B' in one of the (at most four:
 * 19 bytes from offset 6 or 7 of a word) words holding them. */
static __always_inline void keep_tail(struct scan_ctx *c, __u32 start, __u32 end)
{
	__u64 lw = (end - BT_CARRY_MAX) / 8;
	const __u8 *b = AT(lw * 8, 0);
	bool maybe = false;
	for (__u64 k = 0; k < 4; k++) {
		if ((lw + k) * 8 >= end)
			break;
		if (has_b(load64(b + 8 * k)))
			maybe = true;
	}
	c->carry_len = 0;
	if (maybe)
		carry_tail(start, end);
}

#include "frame.bpf.h"

/*
 * scan_segment copies len bytes of user memory behind the carried bytes and
 * scans them. A global function, verified once. Returns -1 when the user
 * memory could not be read.
 */
__noinline int scan_segment(__u64 uptr, __u64 len)
{
	struct scan_ctx *c = get_ctx();
	if (!c)
		return -1;
	if (len == 0 || len > SCAN_CHUNK)
		return 0;
	long start = stage(c, uptr, len);
	if (start < 0)
		return -1;
	__u32 end = HEAD + len;
	if (match_mode == BT_MATCH_FRAME) {
		struct bt_stats *st = get_stats();
		if (st)
			frame_segment(c, st, HEAD, end);
		return 0;
	}
	/* Words at start, start + STRIDE, ...: a marker within [start, end)
	 * holds one of them. Whole blocks first, then the tail. A small
	 * chunk's blocks are scanned here, not in scan_words: on kernels with
	 * return-thunk and retpoline mitigations every BPF-to-BPF call and
	 * return costs tens of ns, as much as the scan of a few hundred bytes. */
	__u64 o = start;
	if (len <= SMALL) {
		o = scan_blocks(c, o, start, end, SMALL_BLOCKS);
	} else {
		for (__u32 i = 0; i < NSUB; i++) {
			__u64 next = scan_words(o, start, end);
			if (next == o)
				break;
			o = next;
		}
	}
	scan_tail(c, o, start, end);
	keep_tail(c, start, end);
	return 0;
}

/* next_msg moves the walk of a recvmmsg/sendmmsg to its next mmsghdr entry:
 * that message's iovec array and the bytes the kernel says it moved. Returns
 * non-zero when there is none (always, for the other calls). */
static __always_inline int next_msg(struct scan_ctx *c)
{
	struct bt_mmsghdr mh;
	__u32 i = c->midx;
	if (!c->mmsg || i >= c->mcnt || i >= MAX_MMSG)
		return 1;
	if (bpf_probe_read_user(&mh, sizeof(mh), (void *)(c->mmsg + (__u64)i * sizeof(mh)))) {
		c->fault = 1;
		return 1;
	}
	c->midx = i + 1;
	c->iov = mh.hdr.msg_iov;
	c->iovcnt = mh.hdr.msg_iovlen;
	c->iov_idx = 0;
	c->batch_at = 0;
	c->batch_len = 0;
	c->msg_left = mh.msg_len;
	return 0;
}

/*
 * scan_step advances the walk over a call's buffers by one step: it either
 * moves to the next mmsghdr entry, fetches the next iovec entry or scans the
 * next chunk. Returns non-zero when the walk is over. A global function
 * keeping its state in the per-CPU context, so that the verifier checks one
 * step, not every path through MAX_STEPS of them.
 */
__noinline int scan_step(void)
{
	struct scan_ctx *c = get_ctx();
	if (!c || c->remaining == 0)
		return 1;
	if (c->left == 0) {
		if (c->msg_left == 0)
			return next_msg(c);
		/* Next iovec entry, from a batch read IOV_BATCH at a time. */
		__u32 idx = c->iov_idx;
		if (!c->iov || idx >= c->iovcnt || idx >= MAX_IOV)
			return 1;
		if (idx < c->batch_at || idx - c->batch_at >= c->batch_len) {
			__u64 k = c->iovcnt - idx;
			if (k > IOV_BATCH)
				k = IOV_BATCH;
			if (bpf_probe_read_user(c->iovs, k * sizeof(struct bt_iovec),
						(void *)(c->iov + (__u64)idx * sizeof(struct bt_iovec)))) {
				c->fault = 1;
				return 1;
			}
			c->batch_at = idx;
			c->batch_len = k;
		}
		struct bt_iovec *iov = &c->iovs[(idx - c->batch_at) & (IOV_BATCH - 1)];
		c->iov_idx = idx + 1;
		c->ptr = iov->iov_base;
		__u32 lim = c->msg_left < c->remaining ? c->msg_left : c->remaining;
		c->left = iov->iov_len < lim ? iov->iov_len : lim;
		if (c->left == 0)
			return 0;
	}
	__u32 n = c->left < SCAN_CHUNK ? c->left : SCAN_CHUNK;
	c->seg_base = c->done;
	if (scan_segment(c->ptr, n) < 0) {
		c->fault = 1;
		return 1;
	}
	c->ptr += n;
	c->left -= n;
	c->msg_left -= n;
	c->remaining -= n;
	c->done += n;
	return 0;
}

static long loop_step(__u64 i, void *unused)
{
	return scan_step() ? 1 : 0;
}

/* size_class is floor(log2(n)), 0 for n = 0. */
static __always_inline __u32 size_class(__u32 n)
{
	__u32 r = 0;
	if (n >> 16) {
		n >>= 16;
		r += 16;
	}
	if (n >> 8) {
		n >>= 8;
		r += 8;
	}
	if (n >> 4) {
		n >>= 4;
		r += 4;
	}
	if (n >> 2) {
		n >>= 2;
		r += 2;
	}
	return r + (n >> 1);
}

/*
 * start_call fills what the header of the call's first event takes from the
 * call; fill_header the rest, at the first marker. The clock is read here
 * only for calls of more than EAGER_TS bytes: a smaller call is stamped when
 * its scan reaches its first marker, at most the scan of EAGER_TS bytes
 * (~0.1 µs) later, and one without a marker not at all. A read's time is
 * taken when its scan ends in either case.
 */
static __always_inline void start_call(struct scan_ctx *c, struct sock *sk, __u32 dir, __u32 call,
				       __u32 total)
{
	struct bt_event *e = &c->ev[0];
	e->ts_ns = total > EAGER_TS ? bpf_ktime_get_ns() : 0;
	if (clock_cpus && dir == BT_DIR_OUT) {
		/* A write's time is when its bytes were handed over: its
		 * clocks are taken then, before other CPUs switch during the
		 * scan (a read's at its scan's end, its time). */
		e->ts_ns = bpf_ktime_get_ns();
		take_stamp(&c->stamp, e->ts_ns);
	}
	e->sock = (__u64)sk;
	e->bytes = total;
	e->dir = dir;
	e->call = call;
	e->flags = 0;
	e->nr_markers = 0;
	c->nev = 0;
	c->found = 0;
}

/* How scan_call finds a call's bytes. */
enum walk_kind {
	WALK_BUF,  /* one buffer at uptr */
	WALK_IOV,  /* an iovec array at uptr, n entries */
	WALK_MMSG, /* an mmsghdr array at uptr, n entries */
};

/* walk scans the call's bytes: remaining of them, from the buffers uptr
 * and n say (see walk_kind). */
static __always_inline void walk(struct scan_ctx *c, __u64 uptr, __u64 n, enum walk_kind kind, bool loop)
{
	__u32 remaining = c->remaining;
	c->fault = 0;
	c->done = 0;
	c->seg_base = 0;
	if (kind == WALK_BUF && remaining <= SCAN_CHUNK) {
		/* One chunk: most calls, spared the walk's steps and state. */
		if (scan_segment(uptr, remaining) < 0) {
			c->fault = 1;
		} else {
			c->done = remaining;
			c->remaining = 0;
		}
		return;
	}
	c->iov = kind == WALK_IOV ? uptr : 0;
	c->iovcnt = kind == WALK_IOV ? n : 0;
	c->mmsg = kind == WALK_MMSG ? uptr : 0;
	c->mcnt = kind == WALK_MMSG ? n : 0;
	c->midx = 0;
	c->ptr = uptr;
	c->left = kind == WALK_BUF ? remaining : 0;
	c->msg_left = kind == WALK_MMSG ? 0 : remaining;
	c->iov_idx = 0;
	c->batch_at = 0;
	c->batch_len = 0;
	if (loop) {
		bpf_loop(LOOP_STEPS, loop_step, NULL, 0);
	} else {
		for (int step = 0; step < MAX_STEPS; step++) {
			if (scan_step())
				break;
		}
	}
}

/*
 * The per-socket carry. On the sock path it lives in the socket's own
 * storage: no hash of the socket pointer and no lookup in a shared map per
 * call (bpf_sk_storage_get, for tracing programs since Linux 5.11, needs the
 * BTF socket pointer the sock path's tp_btf programs have). Everywhere else
 * (the raw_tp syscalls path, and the recvmmsg/sendmmsg tracepoints, which
 * resolve the socket from its fd) it lives in the LRU map carries. An mmsg
 * call on the sock path hands the socket's carry over to that map and marks
 * it there (carry_val.lru); the socket's next call takes it back.
 */
static __always_inline struct carry_val *find_carry(struct sock *sk, __u32 dir, bool btf, struct carry_key *key)
{
	if (!btf)
		return bpf_map_lookup_elem(&carries, key);
	/* A socket with no storage at all (most: a carry is kept only for a
	 * call whose last bytes may begin a marker) is told by a plain load. */
	if (!((struct sock___storage *)sk)->sk_bpf_storage)
		return 0;
	struct carry_pair *cp = bpf_sk_storage_get(&sk_carries, sk, 0, 0);
	if (!cp)
		return 0;
	struct carry_val *cv = &cp->v[dir & 1];
	if (cv->lru) {
		struct carry_val *lv = bpf_map_lookup_elem(&carries, key);
		cv->len = 0;
		if (lv) {
			*cv = *lv;
			bpf_map_delete_elem(&carries, key);
		}
		cv->lru = 0;
	}
	return cv;
}

/* keep_carry stores the call's carry for the socket's next call, or clears
 * the one it had; a carry that finds no room is counted. */
static __always_inline void keep_carry(struct scan_ctx *c, struct bt_stats *st, struct sock *sk, bool btf,
				       struct carry_key *key, struct carry_val *cv)
{
	struct carry_val nv = {
		.bytes = { c->carry[0], c->carry[1], c->carry[2] },
		.len = c->carry_len,
	};
	if (btf) {
		if (!cv && nv.len) {
			struct carry_pair *cp = bpf_sk_storage_get(&sk_carries, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
			cv = cp ? &cp->v[key->dir & 1] : 0;
		}
		if (cv)
			*cv = nv;
		else if (nv.len)
			st->carry_lost += 1;
	} else if (nv.len) {
		if (bpf_map_update_elem(&carries, key, &nv, BPF_ANY))
			st->carry_lost += 1;
	} else if (cv) {
		bpf_map_delete_elem(&carries, key);
	}
}

/* account counts the call's bytes scanned and not, per direction and size
 * class; a gap in the stream drops the carried prefix. */
static __always_inline void account(struct scan_ctx *c, struct bt_stats *st, __u32 dir, __u32 total, __u32 skipped)
{
	__u32 remaining = c->remaining;
	__u32 done = c->done;
	bool fault = c->fault;
	st->scanned[dir] += done;
	__u32 k = size_class(total) & (BT_SIZE_CLASSES - 1);
	st->class_calls[dir][k] += 1;
	st->class_scanned[dir][k] += done;
	st->class_markers[dir][k] += c->found;
	if (fault) {
		st->fault_bytes[dir] += remaining;
		st->class_unscanned[dir][k] += remaining;
		remaining = 0;
	}
	skipped += remaining; /* left over when the bounded walk ran out of steps */
	if (skipped) {
		st->unscanned[dir] += skipped;
		st->class_unscanned[dir][k] += skipped;
	}
	if (skipped || fault) {
		/* The stream has a gap: a carried prefix cannot be continued. */
		c->ev[0].flags |= BT_EV_TRUNCATED;
		c->carry_len = 0;
	}
}

/* count_other counts a call whose bytes cannot be scanned (sendfile, splice,
 * io_uring): the bytes it moved are in the counters, never silently gone. */
static __always_inline void count_other(struct bt_stats *st, __u32 dir, __u32 total)
{
	dir &= 1;
	st->other_calls[dir] += 1;
	st->other_bytes[dir] += total;
}

/* frame_gap puts the parser out of sync after bytes it did not see (a call
 * it could not read, or cut short): a held record is dropped. */
static __always_inline void frame_gap(struct scan_ctx *c, __u32 gap)
{
	c->fs.pos += gap;
	__u8 s = c->fs.state;
	if (s == F_TLS || s == F_OFF)
		return;
	line_reset(&c->fs);
	c->fs.flags &= ~(FF_HELD | FF_HELD_NOW | FF_REC);
	c->fs.skip = 0;
	c->fs.remain = 0;
	/* MQTT has no boundary to resume at. */
	c->fs.state = c->fs.proto == BT_PROTO_MQTT ? F_DEAD : F_SYNC;
}

/*
 * frame_call parses one traced call of the target (scan_call in frame
 * mode): the socket's parser is copied into the call's context, the call's
 * bytes walked as for markers, and the parser stored back.
 */
static __always_inline int frame_call(struct scan_ctx *c, struct bt_stats *st, struct sock *sk, __u32 dir,
				      __u32 call, __u64 uptr, __u64 n, enum walk_kind kind, __u32 total, bool loop)
{
	struct carry_key key = { .sock = (__u64)sk, .dir = dir };
	struct fstate *fv = frame_find(c, st, sk, &key);
	if (!fv) {
		st->frame_lost += 1;
		st->unscanned[dir] += total;
		return 0;
	}
	c->fs = *fv;
	c->filled = 0;
	c->tls_found = 0;
	c->mqv_found = 0;
	c->carry_len = 0;
	start_call(c, sk, dir, call, total);
	c->remaining = total < scan_limit ? total : scan_limit;
	if (call == BT_CALL_OTHER) {
		count_other(st, dir, total);
		c->remaining = 0;
	} else {
		walk(c, uptr, n, kind, loop);
		account(c, st, dir, total, total - (total < scan_limit ? total : scan_limit));
	}
	if (c->done < total)
		frame_gap(c, total - c->done);
	frame_hold(c);
	if (c->found)
		flush_events(c, st, false);
	*fv = c->fs;
	if (c->tls_found)
		frame_tls(sk);
	if (c->mqv_found)
		frame_mqtt_level(sk, c->mqv_found);
	return 0;
}

/*
 * scan_call accounts one traced call of the target and scans its bytes.
 * loop: walk under bpf_loop (a constant per program: the other walk is
 * compiled out, so a kernel without bpf_loop never sees the helper). btf:
 * sk is the BTF pointer of the sock path (see find_carry).
 */
static __always_inline int scan_call(struct sock *sk, __u32 dir, __u32 call, __u64 uptr, __u64 n,
				     enum walk_kind kind, __u32 total, bool loop, bool btf)
{
	struct scan_ctx *c = get_ctx();
	struct bt_stats *st = get_stats();
	if (!c || !st)
		return 0;
	dir &= 1;
	st->calls[dir] += 1;
	st->bytes[dir] += total;
	if (match_mode == BT_MATCH_FRAME)
		return frame_call(c, st, sk, dir, call, uptr, n, kind, total, loop);
	if (call == BT_CALL_OTHER) {
		count_other(st, dir, total);
		return 0;
	}

	struct carry_key key = { .sock = (__u64)sk, .dir = dir };
	struct carry_val *cv = find_carry(sk, dir, btf, &key);
	c->carry_len = 0;
	if (cv && cv->len) {
		c->carry[0] = cv->bytes[0];
		c->carry[1] = cv->bytes[1];
		c->carry[2] = cv->bytes[2];
		c->carry_len = cv->len;
	}
	start_call(c, sk, dir, call, total);
	c->remaining = total < scan_limit ? total : scan_limit;
	walk(c, uptr, n, kind, loop);
	account(c, st, dir, total, total - (total < scan_limit ? total : scan_limit));
	if (c->found)
		flush_events(c, st, false);
	if (c->carry_len || (cv && cv->len))
		keep_carry(c, st, sk, btf, &key, cv);
	return 0;
}

/* is_tcp_read: the raw_tp path, through probe reads. */
static __always_inline bool is_tcp_read(struct sock *sk)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	return (family == AF_INET || family == AF_INET6) &&
	       BPF_CORE_READ(sk, sk_protocol) == IPPROTO_TCP &&
	       BPF_CORE_READ(sk, sk_type) == SOCK_STREAM;
}

/* classify maps a system call to what the probe can scan. */
static __always_inline __u32 classify(__u32 dir, long nr, __u64 arg1, __u64 arg2, __u64 *uptr, __u64 *n,
				      enum walk_kind *kind)
{
	*uptr = arg1;
	*n = 0;
	*kind = WALK_BUF;
	if (dir == BT_DIR_IN) {
		switch (nr) {
		case NR_read:
			return BT_CALL_READ;
		case NR_recvfrom:
			return BT_CALL_RECVFROM;
		case NR_readv:
		case NR_preadv2:
			*n = arg2;
			*kind = WALK_IOV;
			return BT_CALL_READV;
		case NR_recvmsg:
			break;
		default:
			return BT_CALL_OTHER;
		}
	} else {
		switch (nr) {
		case NR_write:
			return BT_CALL_WRITE;
		case NR_sendto:
			return BT_CALL_SENDTO;
		case NR_writev:
		case NR_pwritev2:
			*n = arg2;
			*kind = WALK_IOV;
			return BT_CALL_WRITEV;
		case NR_sendmsg:
			break;
		default:
			return BT_CALL_OTHER;
		}
	}
	/* recvmsg/sendmsg: the iovec array is in the user's msghdr, read into
	 * the per-CPU context rather than onto the stack: the programs' stack
	 * over their deepest chain of calls must stay within 512 bytes. */
	struct scan_ctx *c = get_ctx();
	if (!c || bpf_probe_read_user(&c->mh, sizeof(c->mh), (void *)arg1))
		return BT_CALL_OTHER;
	*uptr = c->mh.msg_iov;
	*n = c->mh.msg_iovlen;
	*kind = WALK_IOV;
	return dir == BT_DIR_IN ? BT_CALL_RECVMSG : BT_CALL_SENDMSG;
}

/* skip_read tells reads whose bytes are not stream data the broker consumed
 * (peeks, which are read again; truncating and error-queue reads), and
 * counts them. */
static __always_inline bool skip_read(__u32 dir, int flags)
{
	if (dir != BT_DIR_IN || !(flags & (MSG_PEEK | MSG_TRUNC | MSG_ERRQUEUE)))
		return false;
	struct bt_stats *st = get_stats();
	if (st)
		st->peeks += 1;
	return true;
}

static __always_inline bool is_target(void)
{
	return (bpf_get_current_pid_tgid() >> 32) == targ_tgid;
}

/* ---- recvmmsg/sendmmsg, on either path ---- */

static __always_inline struct sock *sock_of_fd(int fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd < 0 || (unsigned int)fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = 0;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return 0;
	unsigned short mode = BPF_CORE_READ(f, f_inode, i_mode);
	if ((mode & S_IFMT) != S_IFSOCK)
		return 0;
	struct socket *so = BPF_CORE_READ(f, private_data);
	return BPF_CORE_READ(so, sk);
}

/*
 * mmsg_total sums msg_len over the first n entries of the user's mmsghdr
 * array: the bytes the call moved (its result is a count of messages). A
 * global function, verified once. An entry that cannot be read counts as 0
 * bytes, and the walk then counts the call's rest as faulted.
 */
__noinline __u32 mmsg_total(__u64 arr, __u32 n)
{
	__u32 total = 0;
	for (__u32 i = 0; i < MAX_MMSG; i++) {
		__u32 len = 0;
		if (i >= n)
			break;
		bpf_probe_read_user(&len, sizeof(len),
				    (void *)(arr + (__u64)i * sizeof(struct bt_mmsghdr) +
					     __builtin_offsetof(struct bt_mmsghdr, msg_len)));
		total += len;
	}
	return total;
}

/* on_mmsg scans a recvmmsg/sendmmsg of ret messages on fd, from the system
 * call's exit: the entries' msg_len are set only then. */
static __always_inline int on_mmsg(int fd, __u64 arr, long ret, int flags, __u32 dir, bool loop)
{
	struct sock *sk = sock_of_fd(fd);
	if (!sk || !is_tcp_read(sk) || skip_read(dir, flags))
		return 0;
	__u32 n = ret < MAX_MMSG ? ret : MAX_MMSG;
	__u32 call = dir == BT_DIR_IN ? BT_CALL_RECVMMSG : BT_CALL_SENDMMSG;
	return scan_call(sk, dir, call, arr, n, WALK_MMSG, mmsg_total(arr, n), loop, false);
}

/* on_other counts a call on fd that moved ret bytes without the probe being
 * able to scan them, if fd is a TCP socket; returns whether it was. */
static __always_inline bool on_other(int fd, __u32 dir, long ret)
{
	struct sock *sk = sock_of_fd(fd);
	struct bt_stats *st = get_stats();
	if (!sk || !st || !is_tcp_read(sk))
		return false;
	dir &= 1;
	st->calls[dir] += 1;
	st->bytes[dir] += ret;
	count_other(st, dir, ret);
	return true;
}

/* ---- path "sock": tp_btf on the socket length tracepoints (Linux 6.3+) ---- */

/* lend_carry hands the socket's carry to the LRU map for an mmsg call,
 * which its per-syscall tracepoint scans at the call's exit. */
static __always_inline void lend_carry(struct sock *sk, __u32 dir)
{
	struct carry_pair *cp = bpf_sk_storage_get(&sk_carries, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!cp)
		return;
	struct carry_val *cv = &cp->v[dir & 1];
	if (cv->len) {
		struct carry_key key = { .sock = (__u64)sk, .dir = dir };
		struct carry_val nv = *cv;
		nv.lru = 0;
		if (bpf_map_update_elem(&carries, &key, &nv, BPF_ANY)) {
			struct bt_stats *st = get_stats();
			if (st)
				st->carry_lost += 1;
		}
		cv->len = 0;
	}
	cv->lru = 1;
}

/* on_sock_io: the task, needed for the call's registers anyway, also says
 * whether it is the target's, with one helper call instead of two. */
static __always_inline int on_sock_io(struct sock *sk, __u32 dir, int ret, int flags)
{
	struct task_struct *task = bpf_get_current_task_btf();
	if (task->tgid != targ_tgid || ret <= 0)
		return 0;
	__u16 family = sk->__sk_common.skc_family;
	if ((family != AF_INET && family != AF_INET6) || sk->sk_protocol != IPPROTO_TCP ||
	    sk->sk_type != SOCK_STREAM)
		return 0;
	long nr = -1;
	__u64 a1 = 0, a2 = 0;
	if (!(task->flags & (PF_KTHREAD | PF_IO_WORKER))) {
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
		nr = SC_NR(regs);
		a1 = SC_ARG2(regs);
		a2 = SC_ARG3(regs);
	}
	if (nr == NR_recvmmsg || nr == NR_sendmmsg) {
		/* Counted and scanned at the system call's exit (on_mmsg). */
		lend_carry(sk, dir);
		return 0;
	}
	if (skip_read(dir, flags))
		return 0;
	__u64 uptr, n;
	enum walk_kind kind;
	__u32 call = classify(dir, nr, a1, a2, &uptr, &n, &kind);
	/* Linux 6.3+ (the sock tracepoints) always has bpf_loop (5.17). */
	return scan_call(sk, dir, call, uptr, n, kind, ret, true, true);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(sock_recv, struct sock *sk, int ret, int flags)
{
	return on_sock_io(sk, BT_DIR_IN, ret, flags);
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(sock_send, struct sock *sk, int ret, int flags)
{
	return on_sock_io(sk, BT_DIR_OUT, ret, flags);
}

/* The sock path's mmsg programs: perf tracepoints on the two system calls'
 * exits, so that only those calls pay. Linux 6.3+ (the sock path) has
 * bpf_task_pt_regs (5.15) for the call's arguments. */
static __always_inline int on_mmsg_exit(struct bt_sys_exit_ctx *ctx, __u32 dir)
{
	if (!is_target() || ctx->ret <= 0)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	return on_mmsg(SC_ARG1(regs), SC_ARG2(regs), ctx->ret, SC_ARG4(regs), dir, true);
}

SEC("tracepoint/syscalls/sys_exit_recvmmsg")
int sys_exit_recvmmsg(struct bt_sys_exit_ctx *ctx)
{
	return on_mmsg_exit(ctx, BT_DIR_IN);
}

SEC("tracepoint/syscalls/sys_exit_sendmmsg")
int sys_exit_sendmmsg(struct bt_sys_exit_ctx *ctx)
{
	return on_mmsg_exit(ctx, BT_DIR_OUT);
}

/* A splice from a socket into a pipe reads the socket through its
 * splice_read, which the sock tracepoints do not see (a splice into a socket
 * sends through sock_sendmsg, which they do): counted at the call's exit. */
SEC("tracepoint/syscalls/sys_exit_splice")
int sys_exit_splice(struct bt_sys_exit_ctx *ctx)
{
	if (!is_target() || ctx->ret <= 0)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	on_other(SC_ARG1(regs), BT_DIR_IN, ctx->ret);
	return 0;
}

/* ---- path "syscalls": raw_tp on sys_exit, for kernels before 6.3 ---- */

static __always_inline int on_sys_exit(__u64 *ctx, bool loop)
{
	if (!is_target())
		return 0;
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	long ret = (long)ctx[1];
	if (ret <= 0)
		return 0;
	long nr = SC_NR_CORE(regs);
	__u32 dir;
	int flags = 0;
	switch (nr) {
	case NR_read:
	case NR_readv:
	case NR_preadv2:
		dir = BT_DIR_IN;
		break;
	case NR_recvfrom:
		dir = BT_DIR_IN;
		flags = SC_ARG4_CORE(regs);
		break;
	case NR_recvmsg:
		dir = BT_DIR_IN;
		flags = SC_ARG3_CORE(regs);
		break;
	case NR_recvmmsg:
		return on_mmsg(SC_ARG1_CORE(regs), SC_ARG2_CORE(regs), ret, SC_ARG4_CORE(regs), BT_DIR_IN, loop);
	case NR_sendmmsg:
		return on_mmsg(SC_ARG1_CORE(regs), SC_ARG2_CORE(regs), ret, 0, BT_DIR_OUT, loop);
	case NR_sendfile:
		return on_other(SC_ARG1_CORE(regs), BT_DIR_OUT, ret);
	case NR_splice:
		/* One end is a pipe: the other may be a socket. */
		if (!on_other(SC_ARG1_CORE(regs), BT_DIR_IN, ret))
			on_other(SC_ARG3_CORE(regs), BT_DIR_OUT, ret);
		return 0;
	case NR_write:
	case NR_writev:
	case NR_pwritev2:
	case NR_sendto:
	case NR_sendmsg:
		dir = BT_DIR_OUT;
		break;
	default:
		return 0;
	}
	struct sock *sk = sock_of_fd((int)SC_ARG1_CORE(regs));
	if (!sk || !is_tcp_read(sk))
		return 0;
	if (skip_read(dir, flags))
		return 0;
	__u64 uptr, n;
	enum walk_kind kind;
	__u32 call = classify(dir, nr, SC_ARG2_CORE(regs), SC_ARG3_CORE(regs), &uptr, &n, &kind);
	return scan_call(sk, dir, call, uptr, n, kind, ret, loop, false);
}

/* The loader picks one of these two: sys_exit where the kernel has bpf_loop
 * (5.17+), sys_exit_bounded before (its walk stops after MAX_STEPS steps,
 * and counts what it leaves). */
SEC("raw_tp/sys_exit")
int sys_exit(__u64 *ctx)
{
	return on_sys_exit(ctx, true);
}

SEC("raw_tp/sys_exit")
int sys_exit_bounded(__u64 *ctx)
{
	return on_sys_exit(ctx, false);
}

/* ---- floors for `make bench`: empty programs on the same hooks ---- */

SEC("tp_btf/sock_recv_length")
int BPF_PROG(floor_sock_recv, struct sock *sk, int ret, int flags)
{
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(floor_sock_send, struct sock *sk, int ret, int flags)
{
	return 0;
}

SEC("raw_tp/sys_exit")
int floor_sys_exit(__u64 *ctx)
{
	return 0;
}

/* The floor of any scan on the sock path: the target's task, the call's
 * registers and one 8-byte read of its buffer. bpf_probe_read_user has a
 * fixed cost (user-copy hardening, Spectre barriers) that no scan avoids. */
SEC("tp_btf/sock_send_length")
int BPF_PROG(floor_read_send, struct sock *sk, int ret, int flags)
{
	struct task_struct *task = bpf_get_current_task_btf();
	if (task->tgid != targ_tgid || (task->flags & (PF_KTHREAD | PF_IO_WORKER)))
		return 0;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	__u64 w;
	bpf_probe_read_user(&w, sizeof(w), (void *)SC_ARG2(regs));
	return 0;
}

/* --match frame: a connection of a broker port that becomes established
 * gets its parsers, from its first byte on (a socket whose first call finds
 * none was open before the probe: it is parsed from a frame boundary on);
 * one that closes takes them with it, so that a new socket at the same
 * address starts afresh. Every TCP state change on the machine runs this. */
#define TCP_ESTABLISHED 1
#define TCP_CLOSE 7
SEC("raw_tp/inet_sock_set_state")
int frame_sockstate(__u64 *ctx)
{
	if (match_mode != BT_MATCH_FRAME)
		return 0;
	int state = (int)ctx[2];
	struct carry_key key = { .sock = ctx[0], .dir = BT_DIR_IN };
	if (state == TCP_CLOSE) {
		bpf_map_delete_elem(&frames, &key);
		key.dir = BT_DIR_OUT;
		bpf_map_delete_elem(&frames, &key);
	} else if (state == TCP_ESTABLISHED) {
		frame_new((struct sock *)ctx[0]);
	}
	return 0;
}
