/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Layout shared between bpf/sockio.bpf.c and its Go loader (probes/sockio,
 * through bpf2go -type). Changing a struct here changes the Go types on the
 * next `make generate`.
 */
#ifndef BROKERTRACE_SOCKIO_H
#define BROKERTRACE_SOCKIO_H

#define BT_MARKER_LEN 20   /* "BTID" + 16 lowercase hex digits */
#define BT_CARRY_MAX 19    /* a marker split across calls leaves at most this much behind */
#define BT_MAX_MARKERS 32  /* markers per event; a system call with more emits more events */

enum bt_dir {
	BT_DIR_IN = 0,  /* bytes the target read from a socket */
	BT_DIR_OUT = 1, /* bytes the target wrote to a socket */
};

/* Which system call moved the bytes. */
enum bt_call {
	BT_CALL_OTHER = 0, /* not scannable: sendfile, splice, io_uring... */
	BT_CALL_READ,
	BT_CALL_WRITE,
	BT_CALL_READV,
	BT_CALL_WRITEV,
	BT_CALL_RECVFROM,
	BT_CALL_SENDTO,
	BT_CALL_RECVMSG,
	BT_CALL_SENDMSG,
	BT_CALL_RECVMMSG,
	BT_CALL_SENDMMSG,
};

enum bt_event_flags {
	BT_EV_MORE = 1,      /* more events follow for the same system call */
	BT_EV_TRUNCATED = 2, /* part of the call's bytes were not scanned (scan limit, step budget, fault) */
	BT_EV_STAMPED = 4,   /* sched_outs, sched_base and sched_running hold the scheduler's clocks */
	BT_EV_RACED = 8,     /* a CPU's clocks at the event's time were not to be had: changed twice
			      * since, or a change before it still being written */
};

/* Size classes of calls: class k holds calls that moved [2^k, 2^(k+1)) bytes. */
#define BT_SIZE_CLASSES 32

/* Protocols of --match frame (the Go reference: package frame, Proto). */
enum bt_proto {
	BT_PROTO_NONE = 0,
	BT_PROTO_NATS = 1,
	BT_PROTO_MQTT = 2,
	BT_PROTO_STOMP = 3,
	BT_PROTO_AMQP = 4,
	BT_PROTO_REDIS = 5,
};

/* What the probe matches by: markers in the body, or protocol frames. */
enum bt_match {
	BT_MATCH_MARKER = 0,
	BT_MATCH_FRAME = 1,
};

struct bt_marker {
	/* The marker's id; with --match frame the message's key: the payload's
	 * fingerprint combined with its subject's (frame.Record.Key). */
	__u64 id;
	/* Offset just past the marker's (frame: the payload's) last byte within
	 * the bytes this call moved. A marker that began in an earlier call on
	 * the same socket still ends here, at end < BT_MARKER_LEN. */
	__u32 end;
	__u32 len; /* --match frame: the payload's length; 0 for markers */
};

/* One record per traced socket call that carried markers (calls without
 * markers are only counted in bt_stats, so they cost no ring-buffer space). */
struct bt_event {
	__u64 ts_ns;   /* bpf_ktime_get_ns (CLOCK_MONOTONIC) when the call's bytes had
			* been handed over (the hook fired), before the scan */
	__u64 sock;    /* opaque per-socket identity, stable while the socket lives */
	__u32 pid;     /* target process (tgid) */
	__u32 tid;     /* thread that made the call */
	__u32 bytes;   /* bytes the call moved */
	__u32 seq_end; /* TCP: copied_seq (in) or write_seq (out) after the call;
			* a read that also consumed the FIN is one past its data */
	__u16 lport;   /* local TCP port, host order */
	__u16 rport;   /* remote TCP port, host order */
	__u8 dir;      /* enum bt_dir */
	__u8 call;     /* enum bt_call */
	__u8 flags;    /* enum bt_event_flags */
	__u8 nr_markers;
	/* ns from ts_ns to when this event was sent: the end of the scan for
	 * the call's last event (a read returns to the target only then). */
	__u32 scan_ns;
	/* With BT_EV_STAMPED, the target's scheduler clocks (schedclock.h)
	 * when this event was sent: its threads' switch-outs so far, and
	 * their on-CPU time at any t around then, sched_base + sched_running
	 * * t (no target switch is on this CPU meanwhile, so t may be the
	 * call's ts_ns or its scan's end). */
	__u32 sched_running;
	__u64 sched_outs;
	__s64 sched_base;
	struct bt_marker markers[BT_MAX_MARKERS];
};

/* Per-CPU counters; user space sums them. Nothing is dropped without being
 * counted here. Index [dir] is enum bt_dir. */
struct bt_stats {
	__u64 calls[2];          /* traced TCP socket calls of the target */
	__u64 bytes[2];          /* bytes those calls moved */
	__u64 scanned[2];        /* bytes scanned for markers */
	__u64 unscanned[2];      /* bytes not scanned: beyond the scan limit or step budget */
	__u64 fault_bytes[2];    /* bytes whose user memory could not be read */
	__u64 other_calls[2];    /* calls that cannot be scanned (sendfile, splice, io_uring...) */
	__u64 other_bytes[2];    /* bytes those calls moved */
	__u64 markers[2];        /* markers found */
	__u64 peeks;             /* MSG_PEEK reads, not scanned (the data is read again) */
	__u64 events;            /* events written to the ring buffer */
	__u64 dropped_events;    /* events lost: ring buffer full */
	__u64 dropped_markers;   /* markers in those events */
	__u64 carry_lost;        /* a split marker's first bytes not kept for the next call: no memory */
	/* Per direction and size class of the call (log2 of its bytes): the
	 * calls, and the bytes scanned, not scanned (limit, budget or fault)
	 * and markers found, from which user space estimates markers missed. */
	__u64 class_calls[2][BT_SIZE_CLASSES];
	__u64 class_scanned[2][BT_SIZE_CLASSES];
	__u64 class_unscanned[2][BT_SIZE_CLASSES];
	__u64 class_markers[2][BT_SIZE_CLASSES];
	/* --match frame (markers[] then counts message records). */
	__u64 frames[2];          /* complete frames of any kind */
	__u64 frame_bad[2];       /* invalid or oversized headers, wrong trailers */
	__u64 frame_resyncs[2];   /* returns to a frame boundary after a bad frame or a gap */
	__u64 frame_skipped[2];   /* bytes discarded while out of sync */
	__u64 frame_encrypted[2]; /* bytes of TLS connections, not parsed */
	__u64 frame_unparsed[2];  /* bytes of sockets of no protocol the parser knows */
	__u64 frame_held[2];      /* records confirmed by a later call than their payload's end */
	__u64 frame_joined;       /* sockets first seen mid-stream: parsed from a boundary on */
	__u64 frame_tls;          /* sockets found encrypted */
	__u64 frame_lost;         /* calls not parsed: no room for the socket's parser state */
	__u64 frame_interleaved[2]; /* AMQP contents abandoned: another began before their body ended */
};

#endif /* BROKERTRACE_SOCKIO_H */
