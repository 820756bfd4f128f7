// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * sockq: when did the bytes a broker reads become readable on its socket?
 *
 * The socket probe (sockio) sees a message when the broker reads it; a
 * broker that is busy or stopped (a garbage-collection pause) leaves the
 * message waiting in the socket's receive queue before that. This probe
 * samples, for every TCP socket accepted on one of the target's listening
 * ports, the receive sequence number (tcp_sock.rcv_nxt) with the time
 * whenever data is queued; user space then finds for each message the first
 * sample past its last byte: the time it arrived.
 *
 * The hooks fire in softirq context, on whatever task the CPU was running,
 * so the target cannot be told by its pid: sockets are selected by local
 * port (a map user space fills with the target's listening ports), network
 * namespace, and TCP state. Two hook paths, chosen by the loader:
 *
 *  - data_ready: tp_btf on sock:sk_data_ready (Linux 6.3+), called from
 *    sock_def_readable after data was queued and rcv_nxt advanced: the
 *    moment the bytes became readable. Every call moved rcv_nxt.
 *
 *  - tcp_probe: tp_btf on tcp:tcp_probe, for older kernels. It fires at the
 *    start of tcp_rcv_established for every segment (pure ACKs too), before
 *    the segment is queued, so the sample is the segment's end_seq when it
 *    continues the stream in order, else rcv_nxt as it is; a per-socket map
 *    keeps segments that do not move that value out of the ring buffer.
 *
 * On both paths a tp_btf program on sock:inet_sock_set_state follows the
 * target's listeners: when a socket of the target (by the pid of the task
 * calling listen(2), which the transition runs in) starts listening, its
 * port is watched from then on, and user space told. User space thus
 * needs no second look at the target's descriptors (/proc/PID/fd, which
 * takes CAP_SYS_PTRACE) once the recording has begun. The same program
 * samples each watched connection as it becomes established, so that user space can tell
 * connections whose every byte was sampled from those that predate the
 * probe (whose first sampled chunk may have arrived earlier). Samples carry
 * the socket's cookie on the data_ready path, a lifetime of the probe's own
 * on the tcp_probe path (see seen).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "brokertrace.h"
#include "sockq.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before the program is loaded. */
const volatile __u32 targ_netns = 0; /* inode of the target's network namespace; 0: any */
const volatile __u32 targ_tgid = 0;  /* the target's pid (host), whose new listeners are watched; 0: none */
/* Wake the reader only each time this much more is waiting (ring_wake); it
 * also polls on a short timer (see bpf/sockio.bpf.c). */
const volatile __u64 wakeup_bytes = 1 << 20;

#define TCP_ESTABLISHED 1
#define TCP_LISTEN 10

/*
 * Fields bpf/include/vmlinux.h does not declare, as CO-RE "flavors": libbpf drops
 * the ___sq suffix when it matches these against the kernel's BTF, so the
 * offsets are relocated like any other field's. On tp_btf the loads below
 * go straight through the traced pointers; the verifier checks them
 * against the kernel's own struct sock and struct sk_buff.
 */
struct ns_common___sq {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net___sq {
	struct ns_common___sq ns;
} __attribute__((preserve_access_index));

struct sock_common___sq {
	volatile unsigned char skc_state;
	struct {
		struct net___sq *net;
	} skc_net;
} __attribute__((preserve_access_index));

struct sock___sq {
	struct sock_common___sq __sk_common;
} __attribute__((preserve_access_index));

struct sk_buff; /* only ever cast to struct sk_buff___sq */

/* TCP keeps the segment's struct tcp_skb_cb in skb->cb: seq, then end_seq
 * (a layout that has not changed since 2.6). */
struct sk_buff___sq {
	char cb[48];
} __attribute__((preserve_access_index));

/* Local ports whose sockets are sampled: ports[port] != 0. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sq_stats);
} stats SEC(".maps");

/*
 * tcp_probe path: per socket, the value last sampled and the socket's
 * lifetime. That path runs on kernels before 6.3, and those before 5.12
 * refuse bpf_get_socket_cookie in tracing programs; so its events carry a
 * lifetime of its own instead of the cookie: the time the socket became
 * established (set_state), or was first seen. It tells apart sockets that
 * reuse an address as the cookie does. LRU, so that closed sockets age out;
 * a socket that lost its entry starts a new lifetime, which user space sees
 * as a connection that predates the probe (its first chunk's arrival
 * unknown).
 */
struct sock_seen {
	__u64 life;     /* the lifetime the socket's events carry as their cookie */
	__u32 last;     /* rcv_nxt last sampled */
	__u32 has_last; /* last is set */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct sock_seen);
} seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* the loader may resize */
} events SEC(".maps");

/* Make the types visible to bpf2go -type. */
const struct sq_event *unused_event __attribute__((unused));
const struct sq_stats *unused_stats __attribute__((unused));

static __always_inline struct sq_stats *get_stats(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&stats, &zero);
}

/* watched tells the sockets to sample: TCP, not listening, on a watched
 * local port, in the target's network namespace. Cheapest tests first: the
 * hook runs for every socket on the machine. */
static __always_inline bool watched(const struct sock *sk)
{
	__u16 family = sk->__sk_common.skc_family;
	if (family != AF_INET && family != AF_INET6)
		return false;
	if (sk->sk_protocol != IPPROTO_TCP || sk->sk_type != SOCK_STREAM)
		return false;
	__u32 port = sk->__sk_common.skc_num;
	__u8 *on = bpf_map_lookup_elem(&ports, &port);
	if (!on || !*on)
		return false;
	const struct sock___sq *s = (const void *)sk;
	/* A listener is "readable" when a connection waits in accept(). */
	if (s->__sk_common.skc_state == TCP_LISTEN)
		return false;
	if (targ_netns && s->__sk_common.skc_net.net->ns.inum != targ_netns)
		return false;
	return true;
}

/* emit samples sk; cookie: the socket's cookie, or its lifetime (see seen). */
static __always_inline void emit(const struct sock *sk, __u64 cookie, __u32 rcv_nxt, __u16 flags,
				 struct sq_stats *st)
{
	struct sq_event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		__sync_fetch_and_add(&st->dropped, 1);
		return;
	}
	ev->ts_ns = bpf_ktime_get_ns();
	ev->sock = (__u64)sk;
	ev->cookie = cookie;
	ev->rcv_nxt = rcv_nxt;
	ev->lport = sk->__sk_common.skc_num;
	ev->flags = flags;
	/* The reserved record is already counted as waiting. */
	__u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) - RING_REC(sizeof(*ev));
	bpf_ringbuf_submit(ev, ring_wake(avail, RING_REC(sizeof(*ev)), wakeup_bytes));
	__sync_fetch_and_add(&st->events, 1);
}

/* ---- path "data_ready": tp_btf on sock:sk_data_ready (Linux 6.3+) ---- */

SEC("tp_btf/sk_data_ready")
int BPF_PROG(data_ready, const struct sock *sk)
{
	if (!watched(sk))
		return 0;
	struct sq_stats *st = get_stats();
	if (!st)
		return 0;
	/* The verifier knows sk as struct sock; this cast gives it tcp_sock. */
	struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);
	if (!tp)
		return 0;
	__sync_fetch_and_add(&st->hits, 1);
	emit(sk, bpf_get_socket_cookie((void *)sk), tp->rcv_nxt, 0, st);
	return 0;
}

/* ---- path "tcp_probe": tp_btf on tcp:tcp_probe, for older kernels ---- */

SEC("tp_btf/tcp_probe")
int BPF_PROG(tcp_probe, const struct sock *sk, const struct sk_buff *skb)
{
	if (!watched(sk))
		return 0;
	struct sq_stats *st = get_stats();
	if (!st)
		return 0;
	struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);
	if (!tp)
		return 0;
	__sync_fetch_and_add(&st->hits, 1);
	__u32 nxt = tp->rcv_nxt;
	const struct sk_buff___sq *b = (const void *)skb;
	__u32 seq = *(__u32 *)&b->cb[0];
	__u32 end = *(__u32 *)&b->cb[4];
	/* A segment that starts at or before rcv_nxt and ends after it
	 * continues the stream: once queued, rcv_nxt is its end. */
	if ((__s32)(seq - nxt) <= 0 && (__s32)(end - nxt) > 0)
		nxt = end;
	__u64 key = (__u64)sk;
	struct sock_seen *sn = bpf_map_lookup_elem(&seen, &key);
	if (!sn) {
		struct sock_seen first = { .life = bpf_ktime_get_ns() };
		bpf_map_update_elem(&seen, &key, &first, BPF_NOEXIST);
		sn = bpf_map_lookup_elem(&seen, &key);
		if (!sn)
			return 0;
	}
	if (sn->has_last && sn->last == nxt) {
		__sync_fetch_and_add(&st->unchanged, 1);
		return 0;
	}
	sn->last = nxt;
	sn->has_last = 1;
	emit(sk, sn->life, nxt, 0, st);
	return 0;
}

/* ---- both paths: tp_btf on sock:inet_sock_set_state ---- */

/* The target starts listening (CLOSE → LISTEN, in its listen(2) call, the
 * port bound already): watch the port, and tell user space with an event
 * of its own. A listener without a port (listen(2) before bind(2) binds it
 * after the transition) is counted. */
static __always_inline void on_listen(const struct sock *sk, int newstate)
{
	if (newstate != TCP_LISTEN || !targ_tgid || (bpf_get_current_pid_tgid() >> 32) != targ_tgid)
		return;
	struct sq_stats *st = get_stats();
	if (!st)
		return;
	__u32 port = sk->__sk_common.skc_num;
	if (!port) {
		__sync_fetch_and_add(&st->unbound, 1);
		return;
	}
	__u8 on = 1;
	bpf_map_update_elem(&ports, &port, &on, BPF_ANY);
	__sync_fetch_and_add(&st->listens, 1);
	emit(sk, 0, 0, SQ_LISTEN, st);
}

/* A connection accepted on a watched port becomes established (the
 * tracepoint fires before the state changes): sample its start, so that user
 * space knows the arrival of all its data from the first byte. lifetime:
 * the tcp_probe path's (see seen), which begins here. */
static __always_inline int on_established(const struct sock *sk, int newstate, bool lifetime)
{
	if (newstate != TCP_ESTABLISHED || !watched(sk))
		return 0;
	struct sq_stats *st = get_stats();
	if (!st)
		return 0;
	struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);
	if (!tp)
		return 0;
	__u64 cookie;
	if (lifetime) {
		__u64 key = (__u64)sk;
		struct sock_seen born = { .life = bpf_ktime_get_ns() };
		bpf_map_update_elem(&seen, &key, &born, BPF_ANY);
		cookie = born.life;
	} else {
		cookie = bpf_get_socket_cookie((void *)sk);
	}
	emit(sk, cookie, tp->rcv_nxt, SQ_BORN, st);
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(set_state, const struct sock *sk, const int oldstate, const int newstate)
{
	on_listen(sk, newstate);
	return on_established(sk, newstate, false);
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(set_state_life, const struct sock *sk, const int oldstate, const int newstate)
{
	on_listen(sk, newstate);
	return on_established(sk, newstate, true);
}

/* ---- floors for benchmarks: empty programs on the same hooks ---- */

SEC("tp_btf/sk_data_ready")
int BPF_PROG(floor_data_ready, const struct sock *sk)
{
	return 0;
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(floor_tcp_probe, const struct sock *sk, const struct sk_buff *skb)
{
	return 0;
}
