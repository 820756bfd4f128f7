/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --match frame: the in-kernel protocol parser of the socket probe
 * (docs/frame-matching.md). Included by sockio.bpf.c, whose scan_call()
 * stages each chunk of a call's bytes in the per-CPU scratch buffer; in
 * frame mode frame_segment() parses the chunk instead of scanning it for
 * markers. Only a record per message leaves the kernel: the key (the
 * payload's fingerprint, FNV-1a 64 over its 8-byte words in four lanes,
 * combined with its subject's FNV-1a 64), the payload's length
 * and where it ended in the call. Never a payload byte.
 *
 * The grammar is that of package frame, the Go reference, byte for byte:
 * its fuzz target compares the two on the same streams split at random.
 * Built: NATS, MQTT, STOMP, AMQP 0-9-1 and Redis.
 *
 * Every step keeps its state in the per-CPU scan_ctx (fs), read and written
 * through a volatile pointer, so that the verifier meets the same register
 * state at the head of the byte loop from every branch of the state machine
 * and walks the loop once per iteration, not once per path.
 */
#ifndef BROKERTRACE_FRAME_BPF_H
#define BROKERTRACE_FRAME_BPF_H

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL
#define KEY_MIX 0x9e3779b97f4a7c15ULL /* frame.Record.Key */
#define MAX_HEADER 4096                /* frame.MaxHeader */
#define MAX_PAYLOAD (1 << 28)          /* frame.MaxPayload */
#define FRAME_RUN 36                   /* byte steps per frame_bytes call: each costs the verifier ~9 500 instructions (Linux 6.18) */
#define FRAME_STEPS 1024               /* steps per chunk: bulk runs and header runs */
#define FRAME_RUNS 8                   /* runs per frame_runs call: 32 took 98.6% of the budget */

enum fstate_st {
	F_LINE = 0, /* a control line */
	F_PAYLOAD,  /* skip, then hash remain bytes */
	F_CR,       /* the payload's trailer: '\r' */
	F_LF,       /* ... and '\n' */
	F_SYNC,     /* out of sync: discard through the next '\n' */
	F_TLS,      /* encrypted: count, parse nothing */
	F_OFF,      /* no protocol the parser knows: count, parse nothing */
	F_DEAD,     /* MQTT after a bad packet: no boundary to resume at, skip */
	F_MQ_RL,    /* MQTT: the fixed header's remaining length */
	F_MQ_CN1,   /* MQTT CONNECT: the protocol name's length */
	F_MQ_CN2,
	F_MQ_CNAME, /* the protocol name */
	F_MQ_CLEVEL,/* the protocol level */
	F_MQ_TL1,   /* MQTT PUBLISH: the topic's length */
	F_MQ_TL2,
	F_MQ_TOPIC, /* the topic */
	F_MQ_PID,   /* the packet identifier (QoS 1, 2) */
	F_MQ_PROPS, /* MQTT 5: the properties' length */
	F_ST_CR1,   /* STOMP: a heart-beat's '\r', its '\n' next */
	F_ST_HDR,   /* STOMP: the command and header lines */
	F_ST_BODY,  /* STOMP: a body without content-length, up to its NUL */
	F_ST_NUL,   /* STOMP: the NUL that ends a frame */
	F_R_LINE,   /* Redis: an element's line after its type byte */
	F_R_STR,    /* Redis: a message's command or channel */
	F_A_PROTO,  /* AMQP: the protocol header */
	F_A_HDR,    /* AMQP: a frame's header (type, channel, size) */
	F_A_METH,   /* AMQP: a method frame's class and method */
	F_A_ARGS,   /* AMQP: a content method's arguments */
	F_A_CHDR,   /* AMQP: a content header's class, weight, body size, flags */
	F_A_END,    /* AMQP: the frame-end octet */
};

#define FF_INFIELD 1  /* inside a field of the line */
#define FF_NUM0 2     /* num[0] is a valid size */
#define FF_NUM1 4     /* num[1] is a valid size so far */
#define FF_HELD 8     /* a record waits for its trailer */
#define FF_HELD_NOW 16 /* ... and its payload ended in this call */
#define FF_REC 32     /* the payload run belongs to a message (else: bytes skipped) */
#define FF_DUE 64     /* a record is complete, to be sent by the byte machine's caller (frame_due) */

#define A_STARTED 1 /* AMQP: past the protocol header, or a first frame */
#define A_PENDING 2 /* a content is in progress (on channel achan) */
#define A_MSG 4     /* ... and carries a message of the direction */
#define A_GOTHDR 8  /* ... its header frame was read */
#define A_EMITEND 16 /* ... with an empty body: its record ends with the frame */

/* HAS_PROTO tells whether the parser of protocol p was asked for. */
#define HAS_PROTO(p) (frame_protos & (1u << (p)))

/* frame_ports maps a broker's TCP port to the protocol spoken on it; a
 * socket's protocol is that of its local port, else of its remote one. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16);
	__type(value, __u8);
} frame_ports SEC(".maps");

/* The parsers of the sockets, per direction (key: the socket and dir). LRU,
 * so that a socket closed mid-frame does not pin its entry. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct carry_key);
	__type(value, struct fstate);
} frames SEC(".maps");

typedef volatile struct fstate vfs_t;

static __always_inline __u64 frame_key(__u64 fp, __u64 subj)
{
	return fp ^ (subj * KEY_MIX);
}

/* line_reset readies the parser for the next control line. */
static __always_inline void line_reset(vfs_t *fs)
{
	fs->state = F_LINE;
	fs->line = 0;
	fs->field = 0;
	fs->vlen = 0;
	fs->word = 0;
	fs->subj = FNV_OFFSET;
	fs->num[0] = 0;
	fs->num[1] = 0;
	fs->flags &= ~(FF_INFIELD | FF_NUM0 | FF_NUM1);
}

/* frame_bad counts a bad frame whose skipped bytes are counted by the
 * caller, drops a held record and starts resynchronising. */
static __always_inline void frame_bad(vfs_t *fs, struct bt_stats *st, __u32 d)
{
	st->frame_bad[d] += 1;
	line_reset(fs);
	fs->flags &= ~(FF_HELD | FF_HELD_NOW | FF_REC);
	fs->skip = 0;
	fs->remain = 0;
	fs->rdepth = 0;
	fs->rflags = 0;
	fs->aflags = A_STARTED;
	fs->state = F_SYNC;
}

__noinline int frame_confirm(__u32 d, __u32 count);

/* frame_due sends an MQTT record payload_end completed. */
static __always_inline void frame_due(vfs_t *fs)
{
	if (fs->flags & FF_DUE) {
		fs->flags &= ~FF_DUE;
		frame_confirm(fs->dir & 1, 0);
	}
}

/* payload_end holds the record whose payload ends at buf[o] (exclusive)
 * until its trailer is checked. */
static __always_inline void payload_end(struct scan_ctx *c, vfs_t *fs, __u64 o)
{
	if (!(fs->flags & FF_REC)) { /* a packet or body skipped: the next one, or STOMP's NUL */
		fs->state = fs->after_skip;
		return;
	}
	fs->flags &= ~FF_REC;
	if (!c->filled) {
		fill_header(c);
		c->filled = 1;
	}
	struct bt_marker *m = (struct bt_marker *)&c->fs.held[__builtin_offsetof(struct bt_event, markers)];
	/* The lanes folded, then the partial word's bytes one by one
	 * (frame.Fingerprint). */
	__u64 h = fs->fp[0], pw = fs->pw;
	h = (h ^ fs->fp[1]) * FNV_PRIME;
	h = (h ^ fs->fp[2]) * FNV_PRIME;
	h = (h ^ fs->fp[3]) * FNV_PRIME;
	__u32 pn = fs->pn;
	for (__u32 k = 0; k < 7; k++) {
		if (k >= pn)
			break;
		h = (h ^ ((pw >> (8 * k)) & 0xff)) * FNV_PRIME;
	}
	m->id = frame_key(h, fs->subj);
	m->end = c->seg_base + o - HEAD;
	m->len = fs->len;
	fs->flags |= FF_HELD | FF_HELD_NOW;
	if (fs->proto == BT_PROTO_MQTT) {
		/* No trailer: the record is complete. It is sent by the caller
		 * of the byte machine (frame_due): a call from here would make
		 * the chain of BPF-to-BPF calls one deeper than the verifiers
		 * of Linux 6.1 take (512 bytes of stack over the chain). */
		fs->flags |= FF_DUE;
		fs->state = F_LINE;
		return;
	}
	fs->state = fs->after_payload;
}

/* frame_confirm sends the held record once its trailer is checked: with
 * this call's events if its payload ended in this call, else as the
 * one-marker event of the call it ended in. A global function, so that
 * the byte loop's verification does not walk the event staging. */
__noinline int frame_confirm(__u32 d, __u32 count)
{
	struct scan_ctx *c = get_ctx();
	struct bt_stats *st = get_stats();
	if (!c || !st)
		return 0;
	d &= 1;
	if (count)
		st->frames[d] += 1;
	__u8 fl = c->fs.flags;
	c->fs.flags = fl & ~(FF_HELD | FF_HELD_NOW);
	if (!(fl & FF_HELD))
		return 0;
	st->markers[d] += 1;
	if (fl & FF_HELD_NOW) {
		struct bt_marker *m = (struct bt_marker *)&c->fs.held[__builtin_offsetof(struct bt_event, markers)];
		stage_marker(c, st, m->id, m->end, m->len);
		return 0;
	}
	st->frame_held[d] += 1;
	if (bpf_ringbuf_output(&events, c->fs.held, sizeof(c->fs.held), RING_WAKE(&events, sizeof(c->fs.held))) == 0) {
		st->events += 1;
	} else {
		st->dropped_events += 1;
		st->dropped_markers += 1;
	}
	return 0;
}

static __always_inline bool nats_space(__u8 ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Verbs as nats_eol sees them: the bytes nats_line shifted into word (ASCII
 * upper case), with the verb's length in the top byte, so that leading NUL
 * bytes count. No verb is longer than 7 bytes. */
#define V_(n, w) ((w) | ((__u64)(n) << 56))
#define B3(a, b, c) (((__u64)(a) << 16) | ((__u64)(b) << 8) | (c))
#define B4(a, b, c, d) ((B3(a, b, c) << 8) | (d))
#define B5(a, b, c, d, e) ((B4(a, b, c, d) << 8) | (e))
#define W3(a, b, c) V_(3, B3(a, b, c))
#define W4(a, b, c, d) V_(4, B4(a, b, c, d))
#define W5(a, b, c, d, e) V_(5, B5(a, b, c, d, e))
#define W7(a, b, c, d, e, f, g) V_(7, (((B5(a, b, c, d, e) << 8) | (f)) << 8) | (g))

/* fp_begin starts a payload's fingerprint. */
static __always_inline void fp_begin(vfs_t *fs)
{
	fs->len = 0;
	fs->fp[0] = FNV_OFFSET;
	fs->fp[1] = FNV_OFFSET ^ 1;
	fs->fp[2] = FNV_OFFSET ^ 2;
	fs->fp[3] = FNV_OFFSET ^ 3;
	fs->pw = 0;
	fs->pn = 0;
	fs->nw = 0;
	fs->flags |= FF_REC;
}

/* nats_begin starts the payload of a PUB/HPUB/MSG/HMSG whose line ended at
 * buf[o] (exclusive): hdr header bytes to skip, then total - hdr to hash. */
static __always_inline void nats_begin(struct scan_ctx *c, vfs_t *fs, __u64 o, __u64 hdr, __u64 total)
{
	fs->skip = hdr;
	fs->remain = total - hdr;
	fp_begin(fs);
	fs->state = F_PAYLOAD;
	if (hdr == 0 && total == 0)
		payload_end(c, fs, o);
}

/* nats_eol takes the '\n' at buf[o - 1] that ends a control line. */
static __always_inline void nats_eol(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u64 o, __u32 d)
{
	__u32 nf = fs->field;
	__u32 line = fs->line;
	__u64 w = fs->vlen <= 7 ? V_(fs->vlen, fs->word) : 0;
	__u8 fl = fs->flags;
	bool n1 = fl & FF_NUM1, n0 = fl & FF_NUM0;
	__u64 v0 = fs->num[0], v1 = fs->num[1];
	if (d == BT_DIR_IN) {
		if (w == W3('P', 'U', 'B') && (nf == 3 || nf == 4) && n1) {
			nats_begin(c, fs, o, 0, v1);
			return;
		}
		if (w == W4('H', 'P', 'U', 'B') && (nf == 4 || nf == 5) && n0 && n1 && v0 <= v1) {
			nats_begin(c, fs, o, v0, v1);
			return;
		}
		if (nf > 0 && (w == W7('C', 'O', 'N', 'N', 'E', 'C', 'T') || w == W3('S', 'U', 'B') ||
			       w == W5('U', 'N', 'S', 'U', 'B') || w == W4('P', 'I', 'N', 'G') ||
			       w == W4('P', 'O', 'N', 'G'))) {
			st->frames[d] += 1;
			line_reset(fs);
			return;
		}
	} else {
		if (w == W3('M', 'S', 'G') && (nf == 4 || nf == 5) && n1) {
			nats_begin(c, fs, o, 0, v1);
			return;
		}
		if (w == W4('H', 'M', 'S', 'G') && (nf == 5 || nf == 6) && n0 && n1 && v0 <= v1) {
			nats_begin(c, fs, o, v0, v1);
			return;
		}
		if (nf > 0 && (w == W4('I', 'N', 'F', 'O') || w == W3('+', 'O', 'K') || w == W4('-', 'E', 'R', 'R') ||
			       w == W4('P', 'I', 'N', 'G') || w == W4('P', 'O', 'N', 'G'))) {
			st->frames[d] += 1;
			line_reset(fs);
			return;
		}
	}
	/* A bad line. The reference skips its first byte and resumes after
	 * the next '\n': this one, unless the line was that '\n' alone. */
	frame_bad(fs, st, d);
	st->frame_skipped[d] += line + 1;
	if (line > 0) {
		st->frame_resyncs[d] += 1;
		fs->state = F_LINE;
	}
}

/* nats_line takes one byte of a control line other than its '\n'. */
static __always_inline void nats_line(vfs_t *fs, struct bt_stats *st, __u8 ch, __u32 d)
{
	__u32 line = fs->line + 1;
	fs->line = line;
	if (line >= MAX_HEADER) {
		frame_bad(fs, st, d);
		st->frame_skipped[d] += line;
		return;
	}
	if (nats_space(ch)) {
		fs->flags &= ~FF_INFIELD;
		return;
	}
	__u8 nf = fs->field;
	if (!(fs->flags & FF_INFIELD)) {
		if (nf < 255)
			nf += 1;
		fs->field = nf;
		fs->num[0] = fs->num[1];
		fs->num[1] = 0;
		__u8 fl = fs->flags & ~FF_NUM0;
		if (fl & FF_NUM1)
			fl |= FF_NUM0;
		fs->flags = fl | FF_INFIELD | FF_NUM1;
	}
	if (nf == 1) {
		__u8 vl = fs->vlen;
		if (vl < 9) {
			fs->vlen = vl + 1;
			fs->word = (fs->word << 8) | (ch >= 'a' && ch <= 'z' ? ch - 32 : ch);
		}
	} else if (nf == 2) {
		fs->subj = (fs->subj ^ ch) * FNV_PRIME;
	}
	if (fs->flags & FF_NUM1) {
		__u64 v = fs->num[1] * 10 + (ch - '0');
		if (ch < '0' || ch > '9' || v > MAX_PAYLOAD)
			fs->flags &= ~FF_NUM1;
		else
			fs->num[1] = v;
	}
}

/* hash_byte adds one payload byte to the fingerprint. */
static __always_inline void hash_byte(vfs_t *fs, __u8 ch)
{
	__u32 pn = fs->pn & 7;
	__u64 pw = fs->pw | ((__u64)ch << (8 * pn));
	if (pn == 7) {
		__u32 j = fs->nw & 3;
		fs->fp[j] = (fs->fp[j] ^ pw) * FNV_PRIME;
		fs->nw = (j + 1) & 3;
		pw = 0;
	}
	fs->pw = pw;
	fs->pn = (pn + 1) & 7;
	fs->len += 1;
}

/* Runs: the header bytes that only feed a hash or a count, taken up to a
 * word at a time. A byte step of the loop in frame_bytes costs about what
 * the bytes' own work does, so a run of them in one step is where the
 * frame parser's cost per message goes down (README, Cost). */

/* first_flag is the index of the lowest byte whose bit 7 is set in m
 * (zero_bytes, sockio.bpf.c), 8 if none: m & -m is 0x80 << 8k, and the
 * constant shifted left by 8k bytes has k in its top byte. */
static __always_inline __u64 first_flag(__u64 m)
{
	if (m == 0)
		return 8;
	return (((m & -m) >> 7) * 0x0001020304050607ULL) >> 56;
}

/* fnv_bytes continues FNV-1a h over the k (at most 8) low bytes of w,
 * lowest first: what k byte steps do. */
static __always_inline __u64 fnv_bytes(__u64 h, __u64 w, __u64 k)
{
#pragma unroll
	for (__u32 j = 0; j < 8; j++) {
		if (j >= k)
			break;
		h = (h ^ ((w >> (8 * j)) & 0xff)) * FNV_PRIME;
	}
	return h;
}

/* payload_byte takes one byte of a short payload run (or of the bytes
 * skipped before it), for every machine. */
static __always_inline void payload_byte(struct scan_ctx *c, vfs_t *fs, __u8 ch, __u64 o)
{
	if (fs->skip) {
		fs->skip -= 1;
	} else {
		hash_byte(fs, ch);
		fs->remain -= 1;
	}
	if (fs->skip == 0 && fs->remain == 0)
		payload_end(c, fs, o);
}

/* nats_byte runs the NATS machine on buf[o - 1] = ch. */
static __always_inline void nats_byte(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u8 ch, __u64 o,
				      __u32 d)
{
	switch (fs->state) {
	case F_LINE:
		if (ch == '\n')
			nats_eol(c, st, fs, o, d);
		else
			nats_line(fs, st, ch, d);
		return;
	case F_PAYLOAD:
		payload_byte(c, fs, ch, o);
		return;
	case F_CR:
		if (ch == '\r') {
			fs->state = F_LF;
			return;
		}
		frame_bad(fs, st, d);
		st->frame_skipped[d] += 1;
		return;
	case F_LF:
		if (ch == '\n') {
			frame_confirm(d, 1);
			line_reset(fs);
			return;
		}
		/* The reference skips the '\r', then discards from here on. */
		frame_bad(fs, st, d);
		st->frame_skipped[d] += 2;
		return;
	case F_SYNC:
		st->frame_skipped[d] += 1;
		if (ch == '\n') {
			st->frame_resyncs[d] += 1;
			line_reset(fs);
		}
		return;
	}
}

/* ---- MQTT 3.1, 3.1.1 and 5 (frame/mqtt.go) ---- */

/* The fixed-header flags each packet type but PUBLISH must carry. */
static __always_inline __u8 mqtt_flags(__u8 typ)
{
	return typ == 6 || typ == 8 || typ == 10 ? 2 : 0;
}

/* mqtt_bad: MQTT has no byte that marks a packet boundary, so a bad packet
 * ends the parse of the connection: its bytes so far and every later one
 * are skipped. */
static __always_inline void mqtt_bad(vfs_t *fs, struct bt_stats *st, __u32 d)
{
	st->frame_bad[d] += 1;
	st->frame_skipped[d] += fs->line;
	fs->flags &= ~(FF_HELD | FF_HELD_NOW | FF_REC);
	fs->skip = 0;
	fs->remain = 0;
	fs->state = F_DEAD;
}

/* mqtt_skip skips the rest of a packet that carries no message. */
static __always_inline void mqtt_skip(struct scan_ctx *c, vfs_t *fs, __u64 n, __u64 o)
{
	fs->skip = n;
	fs->remain = 0;
	fs->flags &= ~FF_REC;
	fs->state = F_PAYLOAD;
	if (n == 0)
		fs->state = F_LINE;
}

/* mqtt_publish starts a PUBLISH's payload once its header is read: the
 * properties skipped, the rest hashed. */
static __always_inline void mqtt_publish(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u64 props, __u64 o,
					 __u32 d)
{
	__u64 hlen = fs->line - fs->fixed, rem = fs->num[0];
	if (hlen + props > rem) {
		mqtt_bad(fs, st, d);
		return;
	}
	st->frames[d] += 1;
	nats_begin(c, fs, o, props, rem - hlen);
}

/* mqtt_after_topic goes on after the topic: the packet identifier, the
 * properties' length, or the payload. */
static __always_inline void mqtt_after_topic(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u64 o, __u32 d)
{
	fs->field = 0;
	fs->word = 0;
	if (fs->vlen > 0)
		fs->state = F_MQ_PID;
	else if (fs->mqv == 5)
		fs->state = F_MQ_PROPS;
	else
		mqtt_publish(c, st, fs, 0, o, d);
}

/* mqtt_fixed acts on a complete fixed header. */
static __always_inline void mqtt_fixed(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u64 o, __u32 d)
{
	__u8 typ = fs->word >> 4, flags = fs->word & 0xf;
	fs->fixed = fs->line;
	if (typ == 0 || (typ != 3 && flags != mqtt_flags(typ))) {
		mqtt_bad(fs, st, d);
	} else if (fs->mqv == 0) {
		if (d != BT_DIR_IN || typ != 1)
			mqtt_bad(fs, st, d); /* no CONNECT seen: the level is unknown */
		else
			fs->state = F_MQ_CN1;
	} else if ((typ == 15 && fs->mqv < 5) || typ == 1) {
		mqtt_bad(fs, st, d);
	} else if (typ != 3) {
		st->frames[d] += 1;
		mqtt_skip(c, fs, fs->num[0], o);
	} else if (((fs->word >> 1) & 3) == 3) {
		mqtt_bad(fs, st, d);
	} else {
		fs->vlen = (fs->word >> 1) & 3; /* QoS */
		fs->state = F_MQ_TL1;
	}
}

/* mqtt_topic_len acts on the topic's length, before the topic. */
static __always_inline void mqtt_topic_len(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u64 o, __u32 d)
{
	__u64 tl = fs->num[1];
	__u64 n = fs->fixed + 2 + tl + (fs->vlen > 0 ? 2 : 0);
	if (n > MAX_HEADER || (fs->mqv == 5 && n >= MAX_HEADER) ||
	    (fs->mqv < 5 && n - fs->fixed > fs->num[0])) {
		mqtt_bad(fs, st, d);
		return;
	}
	fs->subj = FNV_OFFSET;
	fs->remain = tl;
	if (tl > 0)
		fs->state = F_MQ_TOPIC;
	else
		mqtt_after_topic(c, st, fs, o, d);
}

/* mqtt_varint adds ch to the varint at *v (field: bytes so far); returns 1
 * when it is complete, -1 when it is too long. */
static __always_inline int mqtt_varint(vfs_t *fs, __u8 ch, volatile __u64 *v)
{
	__u8 k = fs->field;
	*v = *v | ((__u64)(ch & 0x7f) << (7 * (k & 3)));
	fs->field = k + 1;
	if (!(ch & 0x80))
		return 1;
	return k + 1 >= 4 ? -1 : 0;
}

/* mqtt_byte runs the MQTT machine on buf[o - 1] = ch. */
static __always_inline void mqtt_byte(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u8 ch, __u64 o,
				      __u32 d)
{
	__u8 s = fs->state;
	int r;
	if (s == F_LINE) {
		fs->word = ch;
		fs->line = 1;
		fs->num[0] = 0;
		fs->field = 0;
		fs->state = F_MQ_RL;
		return;
	}
	if (s == F_PAYLOAD) {
		/* Not through nats_byte: its trailer check calls frame_confirm,
		 * a call deeper than the stack over the chain allows. */
		payload_byte(c, fs, ch, o);
		return;
	}
	if (s == F_DEAD) {
		st->frame_skipped[d] += 1;
		return;
	}
	fs->line += 1;
	switch (s) {
	case F_MQ_RL:
		r = mqtt_varint(fs, ch, &fs->num[0]);
		if (r < 0)
			mqtt_bad(fs, st, d);
		else if (r > 0)
			mqtt_fixed(c, st, fs, o, d);
		return;
	case F_MQ_CN1:
	case F_MQ_TL1:
		fs->num[1] = (__u64)ch << 8;
		fs->state = s + 1;
		return;
	case F_MQ_CN2:
		fs->num[1] |= ch;
		if (fs->num[1] > 6 || 2 + fs->num[1] + 1 > fs->num[0]) {
			mqtt_bad(fs, st, d);
			return;
		}
		fs->remain = fs->num[1];
		fs->state = fs->num[1] ? F_MQ_CNAME : F_MQ_CLEVEL;
		return;
	case F_MQ_CNAME:
		fs->remain -= 1;
		if (fs->remain == 0)
			fs->state = F_MQ_CLEVEL;
		return;
	case F_MQ_CLEVEL:
		if (ch < 3 || ch > 5) {
			mqtt_bad(fs, st, d);
			return;
		}
		fs->mqv = ch;
		c->mqv_found = ch;
		st->frames[d] += 1;
		mqtt_skip(c, fs, fs->num[0] - (2 + fs->num[1] + 1), o);
		return;
	case F_MQ_TL2:
		fs->num[1] |= ch;
		mqtt_topic_len(c, st, fs, o, d);
		return;
	case F_MQ_TOPIC:
		fs->subj = (fs->subj ^ ch) * FNV_PRIME;
		fs->remain -= 1;
		if (fs->remain == 0)
			mqtt_after_topic(c, st, fs, o, d);
		return;
	case F_MQ_PID:
		fs->field += 1;
		if (fs->field < 2)
			return;
		fs->field = 0;
		if (fs->mqv == 5)
			fs->state = F_MQ_PROPS;
		else
			mqtt_publish(c, st, fs, 0, o, d);
		return;
	case F_MQ_PROPS:
		r = mqtt_varint(fs, ch, &fs->word);
		if (r < 0 || (r > 0 && fs->line > MAX_HEADER))
			mqtt_bad(fs, st, d);
		else if (r > 0)
			mqtt_publish(c, st, fs, fs->word, o, d);
		return;
	}
}

/* frame_mqtt_byte runs the MQTT machine on buf[o - 1] = ch: a global
 * function, so that the verifier walks the machine once, not once per byte
 * of frame_bytes's loop. */
__noinline int frame_mqtt_byte(__u64 o, __u32 ch)
{
	struct scan_ctx *c = get_ctx();
	struct bt_stats *st = get_stats();
	if (!c || !st)
		return 0;
	vfs_t *fs = &c->fs;
	mqtt_byte(c, st, fs, ch, o, fs->dir & 1);
	return 0;
}

/* ---- STOMP 1.0–1.2 (frame/stomp.go) ---- */

#define ST_MSG 1     /* the frame carries a message */
#define ST_DEST 2    /* its first destination header was read */
#define ST_CL 4      /* its first content-length header was read: num[0] */
#define ST_VAL 8     /* the line is past its key's ':' */
#define ST_INDEST 16 /* the line is the first destination: its value goes into subj */
#define ST_INCL 32   /* the line is the first content-length: its value into num[0] */
#define ST_NODIG 64  /* ... and has no digit yet */
#define ST_CR 128    /* a '\r' waits: dropped if '\n' follows, else part of the line */

/* The words a STOMP header is compared with, as st_shift leaves them:
 * (length, the last 8 bytes, the 8 before), each byte shifted in at the
 * low end; frame.TestFrameWords checks each against its string. Exact for
 * words of up to 16 bytes: a longer command or key is none of them. */
#define ST_W(n, lo, hi) n, lo, hi
#define ST_K_SEND ST_W(4, 0x0000000053454e44ULL, 0x0000000000000000ULL) /* "SEND" */
#define ST_K_CONNECT ST_W(7, 0x00434f4e4e454354ULL, 0x0000000000000000ULL) /* "CONNECT" */
#define ST_K_STOMP ST_W(5, 0x00000053544f4d50ULL, 0x0000000000000000ULL) /* "STOMP" */
#define ST_K_SUBSCRIBE ST_W(9, 0x5542534352494245ULL, 0x0000000000000053ULL) /* "SUBSCRIBE" */
#define ST_K_UNSUBSCRIBE ST_W(11, 0x5542534352494245ULL, 0x0000000000554e53ULL) /* "UNSUBSCRIBE" */
#define ST_K_ACK ST_W(3, 0x000000000041434bULL, 0x0000000000000000ULL) /* "ACK" */
#define ST_K_NACK ST_W(4, 0x000000004e41434bULL, 0x0000000000000000ULL) /* "NACK" */
#define ST_K_BEGIN ST_W(5, 0x000000424547494eULL, 0x0000000000000000ULL) /* "BEGIN" */
#define ST_K_COMMIT ST_W(6, 0x0000434f4d4d4954ULL, 0x0000000000000000ULL) /* "COMMIT" */
#define ST_K_ABORT ST_W(5, 0x00000041424f5254ULL, 0x0000000000000000ULL) /* "ABORT" */
#define ST_K_DISCONNECT ST_W(10, 0x53434f4e4e454354ULL, 0x0000000000004449ULL) /* "DISCONNECT" */
#define ST_K_MESSAGE ST_W(7, 0x004d455353414745ULL, 0x0000000000000000ULL) /* "MESSAGE" */
#define ST_K_CONNECTED ST_W(9, 0x4f4e4e4543544544ULL, 0x0000000000000043ULL) /* "CONNECTED" */
#define ST_K_RECEIPT ST_W(7, 0x0052454345495054ULL, 0x0000000000000000ULL) /* "RECEIPT" */
#define ST_K_ERROR ST_W(5, 0x0000004552524f52ULL, 0x0000000000000000ULL) /* "ERROR" */
#define ST_K_DESTINATION ST_W(11, 0x74696e6174696f6eULL, 0x0000000000646573ULL) /* "destination" */
#define ST_K_CONTENT_LENGTH ST_W(14, 0x742d6c656e677468ULL, 0x0000636f6e74656eULL) /* "content-length" */

/* ST_IS: the line's command or key so far, l bytes long, is the word w
 * (an ST_K_*). */
#define ST_IS(l, fs, w) ST_IS_(l, fs, w)
#define ST_IS_(l, fs, n, lo, hi) ((l) == (n) && (fs)->word == (lo) && (fs)->key2 == (hi))

/* st_shift shifts the byte ch of a command or key into (key2, word): a
 * shift register of its last 16 bytes, the same however the bytes were
 * split into calls, and no multiply in a chain per byte as a hash has
 * (FNV-1a per byte was a tenth of the STOMP parser's time). */
static __always_inline void st_shift(vfs_t *fs, __u8 ch)
{
	fs->key2 = (fs->key2 << 8) | (fs->word >> 56);
	fs->word = (fs->word << 8) | ch;
}

/* st_shift_run shifts the k (1..8) low bytes of w, lowest first, into
 * (key2, word): what k st_shift steps do. The shifts by 8k are taken in
 * two, so that k = 8 shifts by 64 as st_shift does eight times. */
static __always_inline void st_shift_run(vfs_t *fs, __u64 w, __u64 k)
{
	__u64 rev = __builtin_bswap64(w) >> (64 - 8 * k); /* the k bytes, the first highest */
	__u64 sh = 8 * k - 1;
	fs->key2 = ((fs->key2 << sh) << 1) | (fs->word >> (64 - 8 * k));
	fs->word = ((fs->word << sh) << 1) | rev;
}

/* stomp_command tells what the command line just ended is: 1 the frame
 * that carries a message, 0 another frame of direction d, -1 none. */
static __always_inline int stomp_command(vfs_t *fs, __u32 d)
{
	__u64 l = fs->num[1];
	if (d == BT_DIR_IN) {
		if (ST_IS(l, fs, ST_K_SEND))
			return 1;
		if (ST_IS(l, fs, ST_K_CONNECT) || ST_IS(l, fs, ST_K_STOMP) || ST_IS(l, fs, ST_K_SUBSCRIBE) ||
		    ST_IS(l, fs, ST_K_UNSUBSCRIBE) || ST_IS(l, fs, ST_K_ACK) || ST_IS(l, fs, ST_K_NACK) ||
		    ST_IS(l, fs, ST_K_BEGIN) || ST_IS(l, fs, ST_K_COMMIT) || ST_IS(l, fs, ST_K_ABORT) ||
		    ST_IS(l, fs, ST_K_DISCONNECT))
			return 0;
		return -1;
	}
	if (ST_IS(l, fs, ST_K_MESSAGE))
		return 1;
	if (ST_IS(l, fs, ST_K_CONNECTED) || ST_IS(l, fs, ST_K_RECEIPT) || ST_IS(l, fs, ST_K_ERROR))
		return 0;
	return -1;
}

/* stomp_key_end takes the ':' that ends a key: what stomp_content does
 * with it. */
static __always_inline void stomp_key_end(vfs_t *fs, __u8 sf)
{
	__u64 l = fs->num[1] - 1; /* the key's bytes: num[1] counts the ':' */
	sf |= ST_VAL;
	if (ST_IS(l, fs, ST_K_DESTINATION) && !(sf & ST_DEST)) {
		sf |= ST_DEST | ST_INDEST;
		fs->subj = FNV_OFFSET;
	} else if (ST_IS(l, fs, ST_K_CONTENT_LENGTH) && !(sf & ST_CL)) {
		sf |= ST_CL | ST_INCL | ST_NODIG;
		fs->num[0] = 0;
	}
	fs->sflags = sf;
}

/* stomp_content takes one byte of a line other than its line end: the
 * command's or key's hash, the first destination's hash, the first
 * content-length's digits. */
static __always_inline void stomp_content(vfs_t *fs, __u8 ch)
{
	__u8 sf = fs->sflags;
	fs->num[1] += 1;
	if (fs->field == 0 || !(sf & ST_VAL)) {
		if (fs->field == 0 || ch != ':') {
			st_shift(fs, ch);
			return;
		}
		stomp_key_end(fs, sf);
		return;
	}
	if (sf & ST_INDEST) {
		fs->subj = (fs->subj ^ ch) * FNV_PRIME;
	} else if (sf & ST_INCL) {
		/* Digits only, at most MAX_PAYLOAD: anything else leaves
		 * MAX_PAYLOAD + 1, which no later digit undoes. */
		__u64 v = fs->num[0];
		if (ch >= '0' && ch <= '9' && v <= MAX_PAYLOAD)
			v = v * 10 + (ch - '0');
		else
			v = MAX_PAYLOAD + 1;
		fs->num[0] = v > MAX_PAYLOAD ? MAX_PAYLOAD + 1 : v;
		fs->sflags = sf & ~ST_NODIG;
	}
}

/* stomp_body starts a frame's body once the empty line that ends its
 * header was read (at buf[o - 1]). */
static __always_inline void stomp_body(struct scan_ctx *c, vfs_t *fs, __u64 o)
{
	__u8 sf = fs->sflags;
	if (sf & ST_MSG) {
		if (!(sf & ST_DEST))
			fs->subj = FNV_OFFSET;
		if (sf & ST_CL) {
			nats_begin(c, fs, o, 0, fs->num[0]);
			return;
		}
		fp_begin(fs);
		fs->state = F_ST_BODY;
		return;
	}
	fs->flags &= ~FF_REC;
	fs->remain = 0;
	fs->skip = 0;
	fs->state = F_ST_BODY;
	if (sf & ST_CL) {
		fs->skip = fs->num[0];
		fs->state = fs->skip ? F_PAYLOAD : F_ST_NUL;
	}
}

/* stomp_line_end readies the next header line after one that ended well;
 * sf: the line's flags. */
static __always_inline void stomp_line_end(vfs_t *fs, __u8 sf)
{
	fs->sflags = sf & ~(ST_VAL | ST_INDEST | ST_INCL | ST_NODIG | ST_CR);
	fs->num[1] = 0;
	fs->word = 0;
	fs->key2 = 0;
}

/* stomp_eol takes the '\n' that ends a header line; returns false for a
 * bad one. */
static __always_inline bool stomp_eol(struct scan_ctx *c, vfs_t *fs, __u64 o, __u32 d)
{
	__u8 sf = fs->sflags;
	if (fs->field == 0) {
		int cmd = stomp_command(fs, d);
		if (cmd < 0)
			return false;
		if (cmd > 0)
			sf |= ST_MSG;
		fs->field = 1;
	} else if (fs->num[1] == 0) {
		stomp_body(c, fs, o);
		return true;
	} else if (!(sf & ST_VAL) || ((sf & ST_INCL) && ((sf & ST_NODIG) || fs->num[0] > MAX_PAYLOAD))) {
		return false;
	}
	stomp_line_end(fs, sf);
	return true;
}

/* stomp_header takes one byte of a frame's command and header lines. A
 * frame is bad at the byte that makes it so (a NUL, a line that ends
 * invalid, its header's byte MAX_HEADER that does not end it): the
 * reference skips the frame's first byte and resumes after the next NUL,
 * so the bytes so far are skipped and, if this one is a NUL, resumed after. */
static __always_inline void stomp_header(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u8 ch, __u64 o,
					 __u32 d)
{
	__u32 line = fs->line + 1;
	fs->line = line;
	bool ok = true;
	if (ch == 0) {
		frame_bad(fs, st, d);
		st->frame_skipped[d] += line;
		if (line > 1) { /* else the NUL is the byte the reference skips */
			st->frame_resyncs[d] += 1;
			fs->state = F_LINE;
		}
		return;
	}
	if (ch == '\n') {
		ok = stomp_eol(c, fs, o, d);
	} else if (fs->sflags & ST_CR) {
		stomp_content(fs, '\r');
		if (ch != '\r') {
			fs->sflags &= ~ST_CR;
			stomp_content(fs, ch);
		}
	} else if (ch == '\r') {
		fs->sflags |= ST_CR;
	} else {
		stomp_content(fs, ch);
	}
	if (!ok || (fs->state == F_ST_HDR && line >= MAX_HEADER)) {
		frame_bad(fs, st, d);
		st->frame_skipped[d] += line;
	}
}

/* stomp_body_end ends a body without content-length at its NUL, buf[o].
 * A NUL that begins a call ends a body that ended with the call before:
 * the record is that call's, whose header frame_hold kept. */
static __always_inline void stomp_body_end(struct scan_ctx *c, vfs_t *fs, __u64 o)
{
	payload_end(c, fs, o);
	struct bt_event *h = (struct bt_event *)c->fs.held;
	if (h->markers[0].end == 0) {
		h->markers[0].end = h->bytes;
		fs->flags &= ~FF_HELD_NOW;
	}
}

/* stomp_nul ends a frame at its NUL: its held record is sent by the caller
 * of the byte machine (frame_due). */
static __always_inline void stomp_nul(struct bt_stats *st, vfs_t *fs, __u32 d)
{
	st->frames[d] += 1;
	fs->flags |= FF_DUE;
	line_reset(fs);
}

/* stomp_byte runs the STOMP machine on buf[o - 1] = ch. */
static __always_inline void stomp_byte(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u8 ch, __u64 o,
				       __u32 d)
{
	switch (fs->state) {
	case F_LINE:
		if (ch == '\n')
			return; /* a heart-beat */
		if (ch == '\r') {
			fs->state = F_ST_CR1;
			return;
		}
		fs->state = F_ST_HDR;
		fs->line = 0;
		fs->field = 0;
		fs->sflags = 0;
		fs->num[1] = 0;
		fs->word = 0;
		fs->key2 = 0;
		stomp_header(c, st, fs, ch, o, d);
		return;
	case F_ST_CR1:
		if (ch == '\n') {
			fs->state = F_LINE;
			return;
		}
		/* The reference skips the '\r', then resumes after a NUL. */
		frame_bad(fs, st, d);
		st->frame_skipped[d] += 2;
		if (ch == 0) {
			st->frame_resyncs[d] += 1;
			fs->state = F_LINE;
		}
		return;
	case F_ST_HDR:
		stomp_header(c, st, fs, ch, o, d);
		return;
	case F_PAYLOAD:
		payload_byte(c, fs, ch, o);
		return;
	case F_ST_BODY:
		if (ch == 0) {
			if (fs->flags & FF_REC)
				stomp_body_end(c, fs, o - 1);
			stomp_nul(st, fs, d);
		} else if (fs->flags & FF_REC) {
			hash_byte(fs, ch);
		}
		return;
	case F_ST_NUL:
		if (ch == 0) {
			stomp_nul(st, fs, d);
			return;
		}
		frame_bad(fs, st, d);
		st->frame_skipped[d] += 1;
		return;
	case F_SYNC:
		st->frame_skipped[d] += 1;
		if (ch == 0) {
			st->frame_resyncs[d] += 1;
			line_reset(fs);
		}
		return;
	}
}

/* stomp_fast takes, inline in frame_bytes's loop, a byte of a header
 * value that only feeds the destination's hash, a count or the first
 * content-length's number: not a command's or key's byte (the runs after
 * the machine's call take those, st_shift_run), a line's end, a '\r' (or
 * the byte after one), a NUL, a content-length byte that is no digit or
 * one past MAX_PAYLOAD, nor one at the header's byte MAX_HEADER. A call
 * per byte cost more than the parse (an ActiveMQ MESSAGE has ~170 bytes
 * of header). It does with ch what stomp_header does (in stomp_content);
 * false: not such a byte, nothing done. */
static __always_inline bool stomp_fast(vfs_t *fs, __u8 ch)
{
	__u8 sf = fs->sflags;
	if (fs->state != F_ST_HDR || ch == 0 || ch == '\n' || ch == '\r' || (sf & ST_CR) ||
	    fs->line + 1 >= MAX_HEADER)
		return false;
	if (!(sf & ST_VAL) || fs->field == 0)
		return false;
	if (sf & ST_INCL) {
		__u64 v = fs->num[0];
		if (ch < '0' || ch > '9' || v > MAX_PAYLOAD)
			return false;
		v = v * 10 + (ch - '0');
		fs->num[0] = v > MAX_PAYLOAD ? MAX_PAYLOAD + 1 : v;
		fs->sflags = sf & ~ST_NODIG;
	} else if (sf & ST_INDEST) {
		fs->subj = (fs->subj ^ ch) * FNV_PRIME;
	}
	fs->line += 1;
	fs->num[1] += 1;
	return true;
}

/* stomp_run takes in one step the bytes at buf[at..end), at most 8, that
 * stomp_fast would take one at a time: up to the first NUL, '\n', '\r'
 * or, in a key, ':'. It takes that byte too when it is a key's ':' or the
 * '\n' of a line with a value (stomp_eol: nothing to decide but a reset).
 * Bytes past end are stale and never taken. Returns how many it took. */
static __always_inline __u64 stomp_run(struct scan_ctx *c, vfs_t *fs, __u64 at, __u64 end)
{
	__u8 sf = fs->sflags;
	if ((sf & (ST_CR | ST_INCL)) || fs->line + 9 >= MAX_HEADER)
		return 0;
	__u64 w = LOAD(at, 0);
	bool key = !(sf & ST_VAL) || fs->field == 0;
	__u64 m = zero_bytes(w) | zero_bytes(w ^ ('\n' * ONES)) | zero_bytes(w ^ ('\r' * ONES));
	if (key && fs->field != 0)
		m |= zero_bytes(w ^ (':' * ONES));
	__u64 k = first_flag(m);
	__u8 stop = 0;
	if (k < end - at && k < 8)
		stop = w >> (8 * k);
	if (k > end - at)
		k = end - at;
	bool colon = stop == ':' && key && fs->field != 0;
	bool eol = stop == '\n' && !key;
	if (k + colon + eol == 0)
		return 0;
	if (key) {
		if (k)
			st_shift_run(fs, w, k);
	} else if (sf & ST_INDEST) {
		fs->subj = fnv_bytes(fs->subj, w, k);
	}
	fs->line += k;
	fs->num[1] += k;
	if (colon) {
		fs->line += 1;
		fs->num[1] += 1;
		stomp_key_end(fs, sf);
		return k + 1;
	}
	if (eol) {
		fs->line += 1;
		stomp_line_end(fs, sf);
		return k + 1;
	}
	return k;
}

/* frame_stomp_byte runs the STOMP machine on buf[o - 1] = ch: a global
 * function, verified once. */
__noinline int frame_stomp_byte(__u64 o, __u32 ch)
{
	struct scan_ctx *c = get_ctx();
	struct bt_stats *st = get_stats();
	if (!c || !st)
		return 0;
	vfs_t *fs = &c->fs;
	stomp_byte(c, st, fs, ch, o, fs->dir & 1);
	return 0;
}

/* ---- Redis RESP2 and RESP3 (frame/redis.go) ---- */

#define R_CAND 1  /* the top-level aggregate may still be a message */
#define R_NEG 2   /* the line's number began with '-' */
#define R_DIG 4   /* ... has a digit */
#define R_BAD 8   /* ... is no valid number */
#define R_CR 16   /* a '\r' waits: dropped if '\n' follows */
#define R_CMD 32  /* the string read is the command (else the channel) */
#define R_DEPTH 8 /* frame.redisMaxDepth */

/* FNV-1a 64 (frame.Hash) of the commands that carry a message, upper-case
 * in, as written out; frame.TestFrameWords checks each against its string. */
#define R_H_PUBLISH 0x9f718642e842b788ULL  /* "PUBLISH" */
#define R_H_SPUBLISH 0xc647c3344dec6bd9ULL /* "SPUBLISH" */
#define R_H_MESSAGE 0x546401b5d2a8d2a4ULL  /* "message" */
#define R_H_SMESSAGE 0xf7bbdb61b48a8649ULL /* "smessage" */
#define R_H_PMESSAGE 0x9433d952327a9deeULL /* "pmessage" */

/* redis_done closes an element and every aggregate it completes; a
 * top-level element completed is a frame. */
static __always_inline void redis_done(struct bt_stats *st, vfs_t *fs, __u32 d)
{
	for (__u32 k = 0; k <= R_DEPTH; k++) {
		__u8 depth = fs->rdepth;
		if (depth == 0 || depth > R_DEPTH) {
			st->frames[d] += 1;
			return;
		}
		if (depth == 1)
			fs->ridx += 1;
		__u32 left = fs->rstack[(depth - 1) & (R_DEPTH - 1)] - 1;
		fs->rstack[(depth - 1) & (R_DEPTH - 1)] = left;
		if (left > 0)
			return;
		fs->rdepth = depth - 1;
	}
}

/* redis_scalar notes an element other than a bulk string: the top-level
 * aggregate it is in is no message. */
static __always_inline void redis_scalar(vfs_t *fs)
{
	if (fs->rdepth >= 1)
		fs->rflags &= ~R_CAND;
}

/* redis_crlf expects the CRLF after a bulk string's bytes. */
static __always_inline void redis_crlf(vfs_t *fs)
{
	fs->state = F_CR;
}

/* redis_aggregate opens an aggregate of n elements (-1: null). */
static __always_inline bool redis_aggregate(struct bt_stats *st, vfs_t *fs, __u8 t, __s64 n, __u32 d)
{
	bool top = fs->rdepth == 0;
	redis_scalar(fs);
	if (t == '%' || t == '|')
		n *= 2;
	if (n <= 0) {
		redis_done(st, fs, d);
		return true;
	}
	__u8 depth = fs->rdepth;
	if (depth >= R_DEPTH)
		return false;
	fs->rstack[depth & (R_DEPTH - 1)] = n;
	fs->rdepth = depth + 1;
	if (top) {
		fs->rsize = n;
		fs->ridx = 0;
		fs->rflags &= ~R_CAND;
		if ((t == '*' || t == '>') && (n == 3 || n == 4))
			fs->rflags |= R_CAND;
	}
	return true;
}

/* redis_skip skips a bulk string's n bytes, then its CRLF. */
static __always_inline void redis_skip(vfs_t *fs, __u64 n)
{
	fs->skip = n;
	fs->remain = 0;
	fs->flags &= ~FF_REC;
	fs->state = n ? F_PAYLOAD : F_CR;
}

/* redis_string_end acts on the command or channel just read. */
static __always_inline void redis_string_end(vfs_t *fs, __u32 d)
{
	if (fs->rflags & R_CMD) {
		__u64 h = fs->word;
		__u32 want = h == R_H_PMESSAGE ? 4 : 3;
		bool cmd = d == BT_DIR_IN ? h == R_H_PUBLISH || h == R_H_SPUBLISH
					  : h == R_H_MESSAGE || h == R_H_SMESSAGE || h == R_H_PMESSAGE;
		if (!cmd || fs->rsize != want)
			fs->rflags &= ~R_CAND;
	}
	redis_crlf(fs);
}

/* redis_bulk acts on a bulk string's length line (ended at buf[o - 1],
 * line bytes before its '\n'). */
static __always_inline bool redis_bulk(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u8 t, __s64 n,
				       __u32 line, __u64 o, __u32 d)
{
	if (n < 0) {
		redis_scalar(fs);
		redis_done(st, fs, d);
		return true;
	}
	if (!(fs->rflags & R_CAND) || fs->rdepth != 1 || t != '$') {
		redis_scalar(fs);
		redis_skip(fs, n);
		return true;
	}
	__u32 idx = fs->ridx, size = fs->rsize;
	if (idx + 1 == size) { /* the payload */
		nats_begin(c, fs, o, 0, n);
		return true;
	}
	if (idx != 0 && idx + 2 != size) { /* pmessage's pattern */
		redis_skip(fs, n);
		return true;
	}
	if (line + 1 + n > MAX_HEADER)
		return false;
	fs->rflags &= ~R_CMD;
	if (idx == 0) {
		fs->rflags |= R_CMD;
		fs->word = FNV_OFFSET;
	} else {
		fs->subj = FNV_OFFSET;
	}
	fs->remain = n;
	fs->state = F_R_STR;
	if (n == 0)
		redis_string_end(fs, d);
	return true;
}

/* redis_eol takes the '\n' that ends an element's line; returns false for
 * a bad line. */
static __always_inline bool redis_eol(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u64 o, __u32 d)
{
	__u8 t = fs->rtype, rf = fs->rflags;
	__u32 line = fs->line;
	if (t == '\r' && line == 1)
		return false; /* an empty line */
	__s64 n = fs->num[1];
	if (rf & R_NEG)
		n = -n;
	bool num = !(rf & R_BAD) && (rf & R_DIG) && (!(rf & R_NEG) || n == -1);
	fs->state = F_LINE;
	switch (t) {
	case '*':
	case '>':
	case '~':
	case '%':
	case '|':
		return num && redis_aggregate(st, fs, t, n, d);
	case '$':
	case '=':
	case '!':
		return num && redis_bulk(c, st, fs, t, n, line, o, d);
	case '+':
	case '-':
	case ':':
	case '_':
	case '#':
	case ',':
	case '(':
		redis_scalar(fs);
		redis_done(st, fs, d);
		return true;
	}
	if (fs->rdepth == 0 && d == BT_DIR_IN) { /* an inline command */
		redis_done(st, fs, d);
		return true;
	}
	return false;
}

/* redis_line takes one byte of an element's line other than its '\n': the
 * number after the type byte, -1 or decimal digits. */
static __always_inline void redis_line(vfs_t *fs, __u8 ch)
{
	__u8 rf = fs->rflags;
	if (rf & R_CR)
		rf |= R_BAD; /* the '\r' was inside the line */
	rf &= ~R_CR;
	if (ch == '\r') {
		rf |= R_CR;
	} else if (ch == '-' && fs->line == 2) {
		rf |= R_NEG;
	} else if (ch >= '0' && ch <= '9') {
		__u64 v = fs->num[1] * 10 + (ch - '0');
		if ((rf & (R_NEG | R_DIG)) == (R_NEG | R_DIG) || v > MAX_PAYLOAD)
			rf |= R_BAD;
		else
			fs->num[1] = v;
		rf |= R_DIG;
	} else {
		rf |= R_BAD;
	}
	fs->rflags = rf;
}

/* redis_byte runs the Redis machine on buf[o - 1] = ch. */
/* redis_str_byte takes a byte of a short bulk string: the command's
 * (upper-cased in) or the channel's hash. */
static __always_inline void redis_str_byte(vfs_t *fs, __u8 ch, __u32 d)
{
	if (fs->rflags & R_CMD)
		fs->word = (fs->word ^ (d == BT_DIR_IN && ch >= 'a' && ch <= 'z' ? ch - 32 : ch)) * FNV_PRIME;
	else
		fs->subj = (fs->subj ^ ch) * FNV_PRIME;
	fs->remain -= 1;
}

static __always_inline void redis_byte(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u8 ch, __u64 o,
				       __u32 d)
{
	__u32 line;
	switch (fs->state) {
	case F_LINE:
		if (ch == '\n') { /* an empty line: the reference skips it */
			frame_bad(fs, st, d);
			st->frame_skipped[d] += 1;
			return;
		}
		fs->rtype = ch;
		fs->line = 1;
		fs->num[1] = 0;
		fs->rflags &= R_CAND;
		fs->state = F_R_LINE;
		return;
	case F_R_LINE:
		if (ch == '\n') {
			line = fs->line;
			if (!redis_eol(c, st, fs, o, d)) {
				/* The reference skips the line's first byte and
				 * resumes after this '\n'. */
				frame_bad(fs, st, d);
				st->frame_skipped[d] += line + 1;
				st->frame_resyncs[d] += 1;
				fs->state = F_LINE;
			}
			return;
		}
		line = fs->line + 1;
		fs->line = line;
		if (line >= MAX_HEADER) {
			frame_bad(fs, st, d);
			st->frame_skipped[d] += line;
			return;
		}
		redis_line(fs, ch);
		return;
	case F_R_STR:
		redis_str_byte(fs, ch, d);
		if (fs->remain == 0)
			redis_string_end(fs, d);
		return;
	case F_PAYLOAD:
		payload_byte(c, fs, ch, o);
		return;
	case F_CR:
		if (ch == '\r') {
			fs->state = F_LF;
			return;
		}
		frame_bad(fs, st, d);
		st->frame_skipped[d] += 1;
		return;
	case F_LF:
		if (ch == '\n') {
			fs->flags |= FF_DUE;
			fs->state = F_LINE;
			redis_done(st, fs, d);
			return;
		}
		/* The reference skips the '\r', then discards from here on. */
		frame_bad(fs, st, d);
		st->frame_skipped[d] += 2;
		return;
	case F_SYNC:
		st->frame_skipped[d] += 1;
		if (ch == '\n') {
			st->frame_resyncs[d] += 1;
			fs->state = F_LINE;
		}
		return;
	}
}

/* redis_fast takes, inline in frame_bytes's loop, a byte of a short bulk
 * string (a command, a channel) that is not its last: it only feeds a
 * hash. What redis_byte does with it; false: not such a byte. */
static __always_inline bool redis_fast(vfs_t *fs, __u8 ch, __u32 d)
{
	if (fs->state != F_R_STR || fs->remain <= 1)
		return false;
	redis_str_byte(fs, ch, d);
	return true;
}

/* redis_run takes in one step up to 8 bytes at buf[at..end) of a short
 * bulk string that redis_fast would take one at a time: never its last.
 * Not an in command's, which is upper-cased a byte at a time. Returns how
 * many it took. */
static __always_inline __u64 redis_run(struct scan_ctx *c, vfs_t *fs, __u64 at, __u64 end)
{
	bool cmd = fs->rflags & R_CMD;
	if (cmd && (fs->dir & 1) == BT_DIR_IN)
		return 0;
	__u64 k = fs->remain;
	if (k < 2)
		return 0;
	k -= 1;
	if (k > 8)
		k = 8;
	if (k > end - at)
		k = end - at;
	__u64 w = LOAD(at, 0);
	if (cmd)
		fs->word = fnv_bytes(fs->word, w, k);
	else
		fs->subj = fnv_bytes(fs->subj, w, k);
	fs->remain -= k;
	return k;
}

/* frame_redis_byte runs the Redis machine on buf[o - 1] = ch: a global
 * function, verified once. */
__noinline int frame_redis_byte(__u64 o, __u32 ch)
{
	struct scan_ctx *c = get_ctx();
	struct bt_stats *st = get_stats();
	if (!c || !st)
		return 0;
	vfs_t *fs = &c->fs;
	redis_byte(c, st, fs, ch, o, fs->dir & 1);
	return 0;
}

/* ---- AMQP 0-9-1 (frame/amqp.go) ---- */

#define AMQP_FRAME_END 0xce
#define AMQP_MAX_FRAME (1 << 20) /* frame.amqpMaxFrame */

/* The arguments of a content method, read a byte at a time. */
enum amqp_phase {
	AP_CTLEN = 0, /* deliver: the consumer tag's length */
	AP_SKIP,      /* fields before the exchange */
	AP_EXLEN,     /* the exchange's length */
	AP_EX,        /* the exchange */
	AP_RKLEN,     /* the routing key's length */
	AP_RK,        /* the routing key */
	AP_DONE,      /* the rest */
};

/* amqp_bad: the frame is bad at this byte, its k-th (frame.errSkip): the k
 * bytes before it are skipped, and the parser resynchronises from it on. */
static __always_inline void amqp_bad(struct bt_stats *st, vfs_t *fs, __u32 k, __u8 ch, __u32 d)
{
	frame_bad(fs, st, d);
	st->frame_skipped[d] += k + 1;
	if (ch == AMQP_FRAME_END) {
		st->frame_resyncs[d] += 1;
		fs->state = F_LINE;
	}
}

/* amqp_interleaved counts a content abandoned: another content method
 * began before its body was complete. */
static __always_inline void amqp_interleaved(struct bt_stats *st, vfs_t *fs, __u32 d)
{
	if (fs->aflags & A_PENDING)
		st->frame_interleaved[d] += 1;
}

/* amqp_payload follows a frame's header with n bytes, hashed (the body of
 * a message, with a record at its end if emit) or skipped, then the
 * frame-end. */
static __always_inline void amqp_payload(struct scan_ctx *c, vfs_t *fs, __u64 o, __u64 n, bool hash, bool emit)
{
	fs->skip = hash ? 0 : n;
	fs->remain = hash ? n : 0;
	fs->flags &= ~FF_REC;
	if (hash && emit)
		fs->flags |= FF_REC;
	fs->state = F_PAYLOAD;
	if (n == 0)
		payload_end(c, fs, o);
}

/* amqp_header acts on a frame header complete at its byte 6 = ch. */
static __always_inline void amqp_header(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u8 ch, __u64 o,
					__u32 d)
{
	__u64 size = fs->num[1];
	__u16 chan = fs->num[0];
	__u8 af = fs->aflags | A_STARTED;
	fs->aflags = af;
	fs->word = 0;
	if (size > AMQP_MAX_FRAME)
		goto bad;
	switch (fs->rtype) {
	case 1: /* method */
		if (size < 4)
			goto bad;
		fs->state = F_A_METH;
		return;
	case 2: /* content header */
		if (!(af & A_PENDING) || (af & A_GOTHDR) || chan != fs->achan || size < 14)
			goto bad;
		fs->state = F_A_CHDR;
		return;
	case 3: /* content body */
		if (!(af & A_PENDING) || !(af & A_GOTHDR) || chan != fs->achan || size > fs->abody)
			goto bad;
		fs->abody -= size;
		if (fs->abody == 0)
			fs->aflags = af & ~A_PENDING;
		amqp_payload(c, fs, o, size, af & A_MSG, fs->abody == 0);
		return;
	default: /* heartbeat */
		if (chan || size)
			goto bad;
		fs->state = F_A_END;
		return;
	}
bad:
	amqp_bad(st, fs, 6, ch, d);
}

/* amqp_content tells what method class.meth of direction d is: 1 a
 * content method that carries a message (basic.publish in; deliver and
 * get-ok out), 0 another content method (basic.return), -1 none. */
static __always_inline int amqp_content(__u32 class, __u32 meth, __u32 d)
{
	if (class != 60)
		return -1;
	if (d == BT_DIR_IN)
		return meth == 40 ? 1 : -1;
	if (meth == 60 || meth == 71)
		return 1;
	return meth == 50 ? 0 : -1;
}

/* amqp_method acts on a method frame's class and method, complete at its
 * byte 10 = ch. */
static __always_inline void amqp_method(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u8 ch, __u64 o,
					__u32 d)
{
	__u32 meth = fs->word & 0xffff;
	__u64 size = fs->num[1];
	int content = amqp_content(fs->word >> 16, meth, d);
	if (content < 0) {
		amqp_payload(c, fs, o, size - 4, false, false);
		return;
	}
	if (content == 0) {
		amqp_interleaved(st, fs, d);
		fs->aflags = A_STARTED | A_PENDING;
		fs->achan = fs->num[0];
		amqp_payload(c, fs, o, size - 4, false, false);
		return;
	}
	if (7 + size > MAX_HEADER || size == 4) { /* too long, or no arguments */
		amqp_bad(st, fs, 10, ch, d);
		return;
	}
	fs->aleft = size - 4;
	fs->aphase = AP_SKIP;
	fs->acount = d == BT_DIR_IN ? 2 : 9; /* publish: reserved-1; get-ok: delivery tag, redelivered */
	if (d == BT_DIR_OUT && meth == 60)
		fs->aphase = AP_CTLEN;
	fs->state = F_A_ARGS;
}

/* amqp_arg takes one byte of a content method's arguments: the subject is
 * FNV-1a 64 of the exchange, a 0 byte and the routing key. */
static __always_inline void amqp_arg(vfs_t *fs, __u8 ch)
{
	switch (fs->aphase) {
	case AP_CTLEN:
		fs->acount = ch + 9; /* the tag, the delivery tag, redelivered */
		fs->aphase = AP_SKIP;
		return;
	case AP_SKIP:
		fs->acount -= 1;
		if (fs->acount == 0)
			fs->aphase = AP_EXLEN;
		return;
	case AP_EXLEN:
		fs->subj = FNV_OFFSET;
		fs->acount = ch;
		fs->aphase = AP_EX;
		if (ch == 0) {
			fs->subj = (fs->subj ^ 0) * FNV_PRIME;
			fs->aphase = AP_RKLEN;
		}
		return;
	case AP_EX:
		fs->subj = (fs->subj ^ ch) * FNV_PRIME;
		fs->acount -= 1;
		if (fs->acount == 0) {
			fs->subj = (fs->subj ^ 0) * FNV_PRIME;
			fs->aphase = AP_RKLEN;
		}
		return;
	case AP_RKLEN:
		fs->acount = ch;
		fs->aphase = ch ? AP_RK : AP_DONE;
		return;
	case AP_RK:
		fs->subj = (fs->subj ^ ch) * FNV_PRIME;
		fs->acount -= 1;
		if (fs->acount == 0)
			fs->aphase = AP_DONE;
		return;
	}
}

/* amqp_args takes the byte at index i of a content method frame; at the
 * arguments' last byte the content begins, or the frame is bad. */
static __always_inline void amqp_args(struct bt_stats *st, vfs_t *fs, __u8 ch, __u32 i, __u32 d)
{
	amqp_arg(fs, ch);
	fs->aleft -= 1;
	if (fs->aleft > 0)
		return;
	if (fs->aphase != AP_DONE) {
		amqp_bad(st, fs, i, ch, d);
		return;
	}
	amqp_interleaved(st, fs, d);
	fs->aflags = A_STARTED | A_PENDING | A_MSG;
	fs->achan = fs->num[0];
	fp_begin(fs);
	fs->flags &= ~FF_REC;
	fs->state = F_A_END;
}

/* amqp_hdr_byte takes byte i of a frame's header: the channel is bytes
 * 1..2, the size 3..6. */
static __always_inline void amqp_hdr_byte(vfs_t *fs, __u8 ch, __u32 i)
{
	if (i <= 2)
		fs->num[0] = (fs->num[0] << 8) | ch;
	else
		fs->num[1] = (fs->num[1] << 8) | ch;
}

/* amqp_chdr_size takes byte i of a content header frame into the body
 * size, bytes 11..18. */
static __always_inline void amqp_chdr_size(vfs_t *fs, __u8 ch, __u32 i)
{
	if (i >= 11 && i <= 18)
		fs->word = (fs->word << 8) | ch;
}

/* amqp_chdr takes the byte at index i of a content header frame: the body
 * size is bytes 11..18. */
static __always_inline void amqp_chdr(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u8 ch, __u32 i,
				      __u64 o, __u32 d)
{
	amqp_chdr_size(fs, ch, i);
	if (i < 20)
		return;
	if (fs->word > MAX_PAYLOAD) {
		amqp_bad(st, fs, 20, ch, d);
		return;
	}
	__u8 af = fs->aflags | A_GOTHDR;
	fs->abody = fs->word;
	if (fs->abody == 0) { /* no body frame: the record comes with this frame's end */
		af &= ~A_PENDING;
		if (af & A_MSG)
			af |= A_EMITEND;
	}
	fs->aflags = af;
	amqp_payload(c, fs, o, fs->num[1] - 14, false, false);
}

/* amqp_end takes a frame's last byte, which must be the frame-end. */
static __always_inline void amqp_end(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u8 ch, __u64 o,
				     __u32 d)
{
	if (ch != AMQP_FRAME_END) {
		frame_bad(fs, st, d);
		st->frame_skipped[d] += 1;
		return;
	}
	st->frames[d] += 1;
	fs->flags |= FF_DUE;
	if (fs->aflags & A_EMITEND) { /* an empty body's record ends here, confirmed */
		fs->aflags &= ~A_EMITEND;
		fs->flags |= FF_REC;
		payload_end(c, fs, o);
	}
	fs->state = F_LINE;
}

/* amqp_byte runs the AMQP machine on buf[o - 1] = ch. */
static __always_inline void amqp_byte(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u8 ch, __u64 o,
				      __u32 d)
{
	__u32 i = fs->line;
	switch (fs->state) {
	case F_LINE:
		fs->line = 1;
		if (!(fs->aflags & A_STARTED) && d == BT_DIR_IN && ch == 'A') {
			fs->state = F_A_PROTO;
			return;
		}
		if (ch != 1 && ch != 2 && ch != 3 && ch != 8) {
			amqp_bad(st, fs, 0, ch, d);
			return;
		}
		fs->rtype = ch;
		fs->num[0] = 0;
		fs->num[1] = 0;
		fs->state = F_A_HDR;
		return;
	case F_A_PROTO:
		if (i < 4 && ch != (i == 1 ? 'M' : i == 2 ? 'Q' : 'P')) {
			amqp_bad(st, fs, i, ch, d);
			return;
		}
		fs->line = i + 1;
		if (i == 7) {
			fs->aflags |= A_STARTED;
			fs->state = F_LINE;
		}
		return;
	case F_A_HDR:
		amqp_hdr_byte(fs, ch, i);
		fs->line = i + 1;
		if (i == 6)
			amqp_header(c, st, fs, ch, o, d);
		return;
	case F_A_METH:
		fs->word = (fs->word << 8) | ch;
		fs->line = i + 1;
		if (i == 10)
			amqp_method(c, st, fs, ch, o, d);
		return;
	case F_A_ARGS:
		fs->line = i + 1;
		amqp_args(st, fs, ch, i, d);
		return;
	case F_A_CHDR:
		fs->line = i + 1;
		amqp_chdr(c, st, fs, ch, i, o, d);
		return;
	case F_PAYLOAD:
		payload_byte(c, fs, ch, o);
		return;
	case F_A_END:
		amqp_end(c, st, fs, ch, o, d);
		return;
	case F_SYNC:
		st->frame_skipped[d] += 1;
		if (ch == AMQP_FRAME_END) {
			st->frame_resyncs[d] += 1;
			fs->state = F_LINE;
		}
		return;
	}
}

/* amqp_fixed tells a state whose bytes up to a fixed index only feed a
 * number: a frame's header, a method's class and id, a content header. */
static __always_inline bool amqp_fixed(__u8 s)
{
	return s == F_A_HDR || s == F_A_METH || s == F_A_CHDR;
}

/* amqp_fast takes, inline in frame_bytes's loop, a byte that only feeds a
 * number, a hash or a count: of a frame's header, a method's id, a content
 * method's arguments (the consumer tag, the delivery tag, the exchange,
 * the routing key) or a content header's first 20 bytes, but never a
 * field's last byte, where the machine decides. What amqp_byte does with
 * it; false: not such a byte. */
static __always_inline bool amqp_fast(vfs_t *fs, __u8 ch)
{
	__u32 i = fs->line;
	__u8 s = fs->state;
	if (s == F_A_HDR && i <= 5) {
		amqp_hdr_byte(fs, ch, i);
	} else if (s == F_A_METH && i < 10) {
		fs->word = (fs->word << 8) | ch;
	} else if (s == F_A_CHDR && i < 20) {
		amqp_chdr_size(fs, ch, i);
	} else if (s == F_A_ARGS && fs->aleft > 1 && fs->acount > 1 &&
		   (fs->aphase == AP_SKIP || fs->aphase == AP_EX || fs->aphase == AP_RK)) {
		/* What amqp_arg does while no phase ends (acount stays above 0). */
		if (fs->aphase != AP_SKIP)
			fs->subj = (fs->subj ^ ch) * FNV_PRIME;
		fs->acount -= 1;
		fs->aleft -= 1;
	} else {
		return false;
	}
	fs->line = i + 1;
	return true;
}

/* amqp_run takes in one step the bytes of a content method's arguments at
 * buf[at..end) that amqp_arg would take one at a time, never the
 * arguments' last, where the machine decides: all those of the consumer
 * tag and the delivery tag but their last (skipped), up to 8 of the
 * exchange or the routing key but their last (hashed), or one byte that
 * ends an argument or gives a length (amqp_arg's own step). Returns how
 * many it took. */
static __always_inline __u64 amqp_run(struct scan_ctx *c, vfs_t *fs, __u64 at, __u64 end)
{
	__u8 ph = fs->aphase;
	__u64 k = 1;
	if (fs->aleft < 2)
		return 0;
	if ((ph == AP_SKIP || ph == AP_EX || ph == AP_RK) && fs->acount > 1) {
		k = fs->acount;
		if (k > fs->aleft)
			k = fs->aleft;
		k -= 1;
		if (ph != AP_SKIP && k > 8)
			k = 8;
		if (k > end - at)
			k = end - at;
		if (ph != AP_SKIP)
			fs->subj = fnv_bytes(fs->subj, LOAD(at, 0), k);
		fs->acount -= k;
	} else {
		amqp_arg(fs, *AT(at, 0));
	}
	fs->aleft -= k;
	fs->line += k;
	return k;
}

/* be_append appends to x the bytes at indices lo..hi of a field that lie
 * among the k bytes at indices i..i+k-1, whose big-endian value is be:
 * what shifting them into x a byte at a time would give. */
static __always_inline __u64 be_append(__u64 x, __u64 be, __u32 i, __u32 k, __u32 lo, __u32 hi)
{
	__u32 a = i > lo ? i : lo, b = i + k - 1 < hi ? i + k - 1 : hi;
	if (a > b)
		return x;
	__u32 m = b - a + 1;
	__u64 v = (be >> (8 * (i + k - 1 - b))) & (((1ULL << (4 * m)) << (4 * m)) - 1);
	return ((x << (4 * m)) << (4 * m)) | v; /* m may be 8: no shift by 64 */
}

/* amqp_fixed_run takes in one step the bytes at buf[at..end), at most 8,
 * of a frame's header, a method's class and id or a content header's
 * first 20 bytes that amqp_fast would take one at a time, never the last
 * (byte 6, 10 or 20), where the machine decides. Returns how many it
 * took. */
static __always_inline __u64 amqp_fixed_run(struct scan_ctx *c, vfs_t *fs, __u64 at, __u64 end)
{
	__u32 i = fs->line;
	__u8 s = fs->state;
	__u32 last = s == F_A_HDR ? 6 : s == F_A_METH ? 10 : 20;
	if (i >= last)
		return 0;
	__u32 k = last - i;
	if (k > 8)
		k = 8;
	if (k > end - at)
		k = end - at;
	__u64 be = __builtin_bswap64(LOAD(at, 0)) >> (64 - 8 * k);
	if (s == F_A_HDR) {
		fs->num[0] = be_append(fs->num[0], be, i, k, 1, 2);
		fs->num[1] = be_append(fs->num[1], be, i, k, 3, 5);
	} else {
		fs->word = be_append(fs->word, be, i, k, s == F_A_METH ? 7 : 11, s == F_A_METH ? 9 : 18);
	}
	fs->line = i + k;
	return k;
}

__noinline int frame_runs(void);

/* frame_amqp_byte runs the AMQP machine on buf[o - 1] = ch, then takes the
 * runs that may follow: the arguments' by frame_runs, those of a frame's
 * header, a method's id or a content header here (amqp_fixed_run, two at
 * most: no loop of frame_runs walks them). A global function, verified
 * once. The runs are taken here, not after the call in frame_bytes's loop
 * as STOMP's and Redis's are: there, the call made the verifier walk the
 * loop 12% longer. */
__noinline int frame_amqp_byte(__u64 o, __u32 ch)
{
	struct scan_ctx *c = get_ctx();
	struct bt_stats *st = get_stats();
	if (!c || !st)
		return 0;
	vfs_t *fs = &c->fs;
	amqp_byte(c, st, fs, ch, o, fs->dir & 1);
	if (fs->state == F_A_ARGS) {
		frame_runs();
		return 0;
	}
	volatile struct scan_ctx *vc = c;
	/* Two runs: a content header's 13 bytes. No stream's first 3 bytes
	 * are among them (tls_byte): the machine decided on a frame's type
	 * before them, and a TLS record header's first byte is no type. */
	for (__u32 i = 0; i < 2 && amqp_fixed(fs->state); i++) {
		__u64 at = vc->f_at, end = vc->f_end;
		if (at >= end)
			break;
		__u64 k = amqp_fixed_run(c, fs, at, end);
		if (k == 0)
			break;
		vc->f_at = at + k;
		fs->pos += k;
	}
	return 0;
}

/* tls_byte follows the first bytes of an in stream: a TLS record header
 * 0x16 0x03 0x01..0x04 (a ClientHello) makes the connection encrypted. */
static __always_inline void tls_byte(struct scan_ctx *c, struct bt_stats *st, vfs_t *fs, __u8 ch)
{
	__u8 k = fs->tls;
	bool ok = (k == 0 && ch == 0x16) || (k == 1 && ch == 0x03) || (k == 2 && ch >= 0x01 && ch <= 0x04);
	if (!ok) {
		fs->tls = 0xff;
		return;
	}
	fs->tls = k + 1;
	if (k == 2) {
		fs->state = F_TLS;
		fs->flags &= ~(FF_HELD | FF_HELD_NOW);
		st->frame_encrypted[BT_DIR_IN] += 3;
		st->frame_tls += 1;
		c->tls_found = 1;
	}
}

/* frame_runs takes the runs of bytes from the loop's place that the byte
 * machine would only hash or count (see stomp_run, amqp_run and
 * redis_run), one after another, at most FRAME_RUNS of them, and moves the
 * place past them. Called after a byte the machine decided on, where runs
 * begin. A global function, verified once: inline, or in the loop's head
 * where the states of every protocol meet, it made the verifier walk the
 * loop over its budget (the NATS machine alone 20% longer). */
__noinline int frame_runs(void)
{
	struct scan_ctx *c = get_ctx();
	if (!c)
		return 0;
	volatile struct scan_ctx *vc = c;
	vfs_t *fs = &c->fs;
	vc->runs_full = 0;
	for (__u32 i = 0; i < FRAME_RUNS; i++) {
		__u64 at = vc->f_at, end = vc->f_end;
		__u8 s = fs->state;
		__u64 k = 0;
		if (fs->pos < 3 || at >= end)
			return 0; /* tls_byte may still want the stream's first bytes */
		if (HAS_PROTO(BT_PROTO_STOMP) && fs->proto == BT_PROTO_STOMP && s == F_ST_HDR)
			k = stomp_run(c, fs, at, end);
		else if (HAS_PROTO(BT_PROTO_AMQP) && fs->proto == BT_PROTO_AMQP && s == F_A_ARGS)
			k = amqp_run(c, fs, at, end);
		else if (HAS_PROTO(BT_PROTO_REDIS) && fs->proto == BT_PROTO_REDIS && s == F_R_STR)
			k = redis_run(c, fs, at, end);
		if (k == 0)
			return 0;
		vc->f_at = at + k;
		fs->pos += k;
	}
	vc->runs_full = 1;
	return 0;
}

/*
 * frame_bytes runs the byte machine over buf[o..end), at most FRAME_RUN
 * byte steps (and the runs frame_runs takes between them), stopping where
 * a bulk step (a skip, or a payload run of 8 bytes or more) can take over.
 * Returns where it stopped. A global function: verified once.
 */
__noinline __u64 frame_bytes(__u64 o, __u64 end)
{
	struct scan_ctx *c = get_ctx();
	struct bt_stats *st = get_stats();
	if (!c || !st)
		return end;
	/* Nothing lives in a register from one byte to the next but the
	 * pointers and the loop's count: where the byte is, where the run
	 * ends and the direction are read from memory each time, so that no
	 * bound a branch learned tells the states at the loop's head apart. */
	volatile struct scan_ctx *vc = c;
	vfs_t *fs = &c->fs;
	vc->f_at = o;
	vc->f_end = end;
	for (__u32 i = 0; i < FRAME_RUN; i++) {
		__u64 at = vc->f_at;
		if (at >= vc->f_end)
			break;
		__u8 s = fs->state;
		if (s == F_PAYLOAD && (fs->skip || fs->remain >= 8))
			break;
		if (s == F_TLS || s == F_OFF || s == F_DEAD)
			break;
		__u8 ch = *AT(at, 0);
		vc->f_at = at + 1;
		if ((fs->dir & 1) == BT_DIR_IN && fs->tls < 3 && fs->pos == fs->tls)
			tls_byte(c, st, fs, ch);
		fs->pos += 1;
		if (fs->state == F_TLS)
			continue;
		/* Only the protocols asked for: see frame_protos. */
		if (HAS_PROTO(BT_PROTO_MQTT) && fs->proto == BT_PROTO_MQTT) {
			frame_mqtt_byte(vc->f_at, ch);
			frame_due(fs);
		} else if (HAS_PROTO(BT_PROTO_STOMP) && fs->proto == BT_PROTO_STOMP) {
			if (!stomp_fast(fs, ch)) {
				frame_stomp_byte(vc->f_at, ch);
				frame_due(fs);
				if (fs->state == F_ST_HDR && !(fs->sflags & (ST_CR | ST_INCL)))
					frame_runs();
			} else if (vc->runs_full) {
				frame_runs(); /* the rest of a long value: runs, not a byte step each */
			}
		} else if (HAS_PROTO(BT_PROTO_REDIS) && fs->proto == BT_PROTO_REDIS) {
			if (!redis_fast(fs, ch, fs->dir & 1)) {
				frame_redis_byte(vc->f_at, ch);
				frame_due(fs);
				if (fs->state == F_R_STR)
					frame_runs();
			}
		} else if (HAS_PROTO(BT_PROTO_AMQP) && fs->proto == BT_PROTO_AMQP) {
			if (!amqp_fast(fs, ch)) {
				frame_amqp_byte(vc->f_at, ch);
				frame_due(fs);
			}
		} else if (HAS_PROTO(BT_PROTO_NATS)) {
			nats_byte(c, st, fs, ch, vc->f_at, fs->dir & 1);
		}
	}
	return vc->f_at;
}

/* mix_word hashes the payload's next whole word w into its lane. */
static __always_inline void mix_word(struct scan_ctx *c, __u64 w)
{
	__u32 j = c->fs.nw & 3;
	c->fs.fp[j] = (c->fs.fp[j] ^ w) * FNV_PRIME;
	c->fs.nw = (j + 1) & 3;
}

/*
 * frame_hash continues the payload's fingerprint over buf[o..o+n), n <
 * BUF_MASK: the partial word first, a byte at a time, then single words
 * up to the first lane, then blocks of four words, one multiply per lane
 * (four independent chains), then single words, then what is left into
 * the partial word. A global function: verified once, its loops walked
 * per iteration (straight-line but for their ends).
 */
__noinline int frame_hash(__u64 o, __u64 n)
{
	struct scan_ctx *c = get_ctx();
	if (!c)
		return 0;
	__u64 pw = c->fs.pw;
	__u32 pn = c->fs.pn & 7;
	__u64 i = 0;
	for (__u32 k = 0; k < 8; k++) {
		if (pn == 0 || i >= n)
			break;
		pw |= (__u64)*AT(o + i, 0) << (8 * pn);
		i++;
		pn = (pn + 1) & 7;
		if (pn == 0) {
			mix_word(c, pw);
			pw = 0;
		}
	}
	for (__u32 k = 0; k < 3; k++) {
		if ((c->fs.nw & 3) == 0 || n - i < 8 || i > n)
			break;
		mix_word(c, LOAD(o + i, 0));
		i += 8;
	}
	__u64 blocks = i <= n && (c->fs.nw & 3) == 0 ? (n - i) / 32 : 0;
	/* Where the blocks end goes through memory: read back after the loop,
	 * it carries no bound learned at the loop's exit, so the verifier
	 * walks what follows once, not once per iteration it may exit at. */
	volatile struct scan_ctx *vc = c;
	vc->f_at = i + blocks * 32;
	__u64 h0 = c->fs.fp[0], h1 = c->fs.fp[1], h2 = c->fs.fp[2], h3 = c->fs.fp[3];
	for (__u32 k = 0; k < SCAN_CHUNK / 32 + 1; k++) {
		if (k >= blocks)
			break;
		const __u8 *b = AT(o + i + 32 * k, 0);
		h0 = (h0 ^ load64(b)) * FNV_PRIME;
		h1 = (h1 ^ load64(b + 8)) * FNV_PRIME;
		h2 = (h2 ^ load64(b + 16)) * FNV_PRIME;
		h3 = (h3 ^ load64(b + 24)) * FNV_PRIME;
	}
	c->fs.fp[0] = h0;
	c->fs.fp[1] = h1;
	c->fs.fp[2] = h2;
	c->fs.fp[3] = h3;
	i = vc->f_at;
	for (__u32 k = 0; k < 3; k++) {
		if (n - i < 8 || i > n)
			break;
		mix_word(c, LOAD(o + i, 0));
		i += 8;
	}
	for (__u32 k = 0; k < 8; k++) {
		if (i >= n)
			break;
		pw |= (__u64)*AT(o + i, 0) << (8 * pn);
		i++;
		pn = (pn + 1) & 7;
	}
	c->fs.pw = pw;
	c->fs.pn = pn;
	return 0;
}

/* frame_bulk takes a run of buf[o..end) that needs no byte machine: bytes
 * to skip, payload to hash, or a connection's bytes that are not parsed.
 * Returns where it stopped. A global function: verified once. */
__noinline __u64 frame_bulk(__u64 o, __u64 end)
{
	struct scan_ctx *c = get_ctx();
	struct bt_stats *st = get_stats();
	if (!c || !st || o >= end)
		return end;
	vfs_t *fs = &c->fs;
	__u32 d = fs->dir & 1;
	__u64 n = end - o;
	__u8 s = fs->state;
	if (s == F_TLS || s == F_OFF || s == F_DEAD) {
		if (s == F_TLS)
			st->frame_encrypted[d] += n;
		else if (s == F_DEAD)
			st->frame_skipped[d] += n;
		else
			st->frame_unparsed[d] += n;
		fs->pos += n;
		return end;
	}
	if (fs->skip) {
		if (n > fs->skip)
			n = fs->skip;
		fs->skip -= n;
	} else {
		if (n > fs->remain)
			n = fs->remain;
		frame_hash(o, n);
		fs->len += n;
		fs->remain -= n;
	}
	fs->pos += n;
	o += n;
	if (fs->skip == 0 && fs->remain == 0) {
		payload_end(c, fs, o);
		frame_due(fs);
	}
	return o;
}

/* frame_segment parses the chunk buf[start..end). */
static __always_inline void frame_segment(struct scan_ctx *c, struct bt_stats *st, __u64 start, __u64 end)
{
	__u64 o = start;
	for (__u32 i = 0; i < FRAME_STEPS; i++) {
		if (o >= end)
			return;
		__u8 s = c->fs.state;
		if (s == F_TLS || s == F_OFF || s == F_DEAD || (s == F_PAYLOAD && (c->fs.skip || c->fs.remain >= 8)))
			o = frame_bulk(o, end);
		else
			o = frame_bytes(o, end);
	}
	if (o < end) {
		/* Out of steps (thousands of tiny frames in 16 KiB): the rest is
		 * a gap the parser resynchronises after. */
		__u32 d = c->fs.dir & 1;
		st->unscanned[d] += end - o;
		st->frame_skipped[d] += end - o;
		c->fs.pos += end - o;
		frame_bad(&c->fs, st, d);
	}
}

/* frame_proto is the protocol of sk's local port, else of its remote one. */
static __always_inline __u8 frame_proto(struct sock *sk)
{
	__u16 lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	__u16 rport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	__u8 *p = bpf_map_lookup_elem(&frame_ports, &lport);
	if (!p)
		p = bpf_map_lookup_elem(&frame_ports, &rport);
	return p ? *p : BT_PROTO_NONE;
}

/* frame_parsed tells whether the kernel parser has protocol proto
 * (frame.Proto.Kernel) and was asked for it: a socket of any other is
 * counted, not parsed. */
static __always_inline bool frame_parsed(__u8 proto)
{
	return (proto == BT_PROTO_NATS || proto == BT_PROTO_MQTT || proto == BT_PROTO_STOMP || proto == BT_PROTO_AMQP ||
		proto == BT_PROTO_REDIS) &&
	       HAS_PROTO(proto);
}

/* frame_init sets up a parser of direction dir for protocol proto. */
static __always_inline void frame_init(struct fstate *f, __u32 dir, __u8 proto)
{
	__builtin_memset(f, 0, sizeof(*f));
	f->dir = dir;
	f->proto = proto;
	line_reset(f);
	if (!frame_parsed(proto))
		f->state = F_OFF;
	/* What follows a payload and a run of bytes skipped: read from here,
	 * not decided by protocol in the byte loop, whose paths the verifier
	 * walks. */
	f->after_payload = proto == BT_PROTO_STOMP ? F_ST_NUL : proto == BT_PROTO_AMQP ? F_A_END : F_CR;
	f->after_skip = proto == BT_PROTO_STOMP	  ? F_ST_NUL :
			proto == BT_PROTO_REDIS	  ? F_CR :
			proto == BT_PROTO_AMQP	  ? F_A_END :
						    F_LINE;
}

/* frame_new gives a connection that just became established the parsers
 * of its broker port's protocol, from the stream's start. */
static __always_inline void frame_new(struct sock *sk)
{
	struct scan_ctx *c = get_ctx();
	__u8 proto = frame_proto(sk);
	if (!c || proto == BT_PROTO_NONE)
		return;
	struct carry_key key = { .sock = (__u64)sk };
	for (__u32 d = 0; d < 2; d++) {
		key.dir = d;
		frame_init(&c->fs, d, proto);
		bpf_map_update_elem(&frames, &key, &c->fs, BPF_ANY);
	}
}

/* frame_find returns the socket's parser for dir. A socket without one was
 * open before the probe (frame_new never saw it): its parser starts out of
 * sync, at a frame boundary (MQTT, which has none, is not parsed). */
static __always_inline struct fstate *frame_find(struct scan_ctx *c, struct bt_stats *st, struct sock *sk,
						 struct carry_key *key)
{
	struct fstate *fv = bpf_map_lookup_elem(&frames, key);
	if (fv)
		return fv;
	struct fstate *f = &c->fs;
	frame_init(f, key->dir, frame_proto(sk));
	if (frame_parsed(f->proto)) {
		st->frame_joined += 1;
		/* MQTT has no boundary to resume at, nor the level of the
		 * CONNECT it did not see: nothing of it is parsed. */
		f->state = f->proto == BT_PROTO_MQTT ? F_DEAD : F_SYNC;
		f->tls = 0xff;
	}
	/* Another CPU may have made it meanwhile (BPF_NOEXIST fails): take that. */
	bpf_map_update_elem(&frames, key, f, BPF_NOEXIST);
	return bpf_map_lookup_elem(&frames, key);
}

/* frame_tls marks the out direction of a socket whose in stream was found
 * to be encrypted. */
static __always_inline void frame_tls(struct sock *sk)
{
	struct carry_key key = { .sock = (__u64)sk, .dir = BT_DIR_OUT };
	struct fstate *fv = bpf_map_lookup_elem(&frames, &key);
	if (fv) {
		fv->state = F_TLS;
		fv->flags &= ~(FF_HELD | FF_HELD_NOW);
	}
}

/* frame_mqtt_level gives the out direction of an MQTT connection the
 * protocol level of the CONNECT its in direction read. */
static __always_inline void frame_mqtt_level(struct sock *sk, __u8 level)
{
	struct carry_key key = { .sock = (__u64)sk, .dir = BT_DIR_OUT };
	struct fstate *fv = bpf_map_lookup_elem(&frames, &key);
	if (fv)
		fv->mqv = level;
}

/* frame_hold keeps the header of this call with a record held for its
 * trailer: the call's time is the record's. */
static __always_inline void frame_hold(struct scan_ctx *c)
{
	/* A STOMP body without content-length may end with this call: its
	 * NUL, first in the next call, tells (stomp_body_end). */
	bool body = c->fs.state == F_ST_BODY && (c->fs.flags & FF_REC);
	if (!(c->fs.flags & FF_HELD_NOW) && !body)
		return;
	c->fs.flags &= ~FF_HELD_NOW;
	if (!c->filled) {
		fill_header(c);
		c->filled = 1;
	}
	struct bt_event *h = (struct bt_event *)c->fs.held;
	__builtin_memcpy(h, &c->ev[0], __builtin_offsetof(struct bt_event, markers));
	h->scan_ns = bpf_ktime_get_ns() - h->ts_ns;
	h->flags = 0;
	h->nr_markers = 1;
}

#endif /* BROKERTRACE_FRAME_BPF_H */
