/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Layout shared between bpf/sockq.bpf.c and its Go loader (probes/sockq,
 * through bpf2go -type). Changing a struct here changes the Go types on the
 * next `make generate`.
 */
#ifndef BROKERTRACE_SOCKQ_H
#define BROKERTRACE_SOCKQ_H

enum sq_flags {
	/* The connection was just established: no data has arrived yet, and
	 * every later byte's arrival is sampled. Without such a sample the
	 * connection predates the probe. */
	SQ_BORN = 1,
	/* Not a sample: the target began listening on lport, which the probe
	 * watches from then on. */
	SQ_LISTEN = 2,
};

/* One sample of a watched socket's receive queue: by ts_ns, the stream's
 * bytes up to (not including) sequence number rcv_nxt had been queued on
 * the socket. */
struct sq_event {
	__u64 ts_ns;   /* bpf_ktime_get_ns (CLOCK_MONOTONIC) */
	__u64 sock;    /* the struct sock pointer, as bpf/sockio.bpf.c reports it */
	__u64 cookie;  /* socket cookie: tells apart sockets that reuse an address */
	__u32 rcv_nxt; /* tcp_sock.rcv_nxt (tcp_probe path: see there) */
	__u16 lport;   /* local TCP port, host order */
	__u16 flags;   /* enum sq_flags */
};

/* Per-CPU counters; user space sums them. Nothing is dropped without being
 * counted here. */
struct sq_stats {
	__u64 hits;      /* hook runs on a watched socket */
	__u64 events;    /* samples written to the ring buffer */
	__u64 dropped;   /* samples lost: ring buffer full */
	__u64 unchanged; /* tcp_probe path: segments that did not move rcv_nxt */
	__u64 listens;   /* listening sockets the target opened, watched since */
	__u64 unbound;   /* ... of them with no port yet (listen without bind): not watched */
};

#endif /* BROKERTRACE_SOCKQ_H */
