// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * netstack: how many TCP segments the kernel packs into each skb of a
 * broker's connections, per interface, as the kernel itself counts them.
 * Packet taps see a merged skb as one large packet; this probe reads the
 * segment count the stack keeps in skb_shinfo(skb), which is what GSO/TSO
 * will cut a sent skb into and what GRO merged into a received one
 * (ICPE'14 §3.3, Fig. 6).
 *
 *  - out: net:net_dev_start_xmit (skb, dev), fired in xmit_one() just before
 *    the driver gets the skb, after validate_xmit_skb() ran software GSO: a
 *    device with TSO (lo, veth, most NICs) gets whole GSO skbs, one without
 *    it single segments. Counted when the TCP source port is a broker port.
 *  - in: net:netif_receive_skb (skb), fired in __netif_receive_skb_core()
 *    after GRO handed the merged skb up. tcp_gro_complete() stores the
 *    number of merged segments (NAPI_GRO_CB(skb)->count) in
 *    skb_shinfo(skb)->gso_segs, and napi_gro_complete() clears gso_size on
 *    skbs that merged nothing, so gso_size != 0 marks a multi-segment skb
 *    and gso_segs is its count (checked on Linux 6.18 with GRO on veth:
 *    the counts add up to the sender's segs_out). A GSO skb that never went
 *    through GRO (lo, veth without GRO) arrives with the sender's gso_segs.
 *    Counted when the TCP destination port is a broker port.
 *
 * Only skbs of the target's network namespace (the device's netns inode)
 * are counted. Segments = gso_segs when gso_size is set (from the payload
 * and gso_size if a driver left gso_segs 0), else 1.
 *
 * Two hook paths with the same logic: tp_btf (typed arguments, direct
 * loads) and raw_tp (BPF_CORE_READ) for kernels that refuse tp_btf.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "brokertrace.h"

#include "netstack.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct ns_common {
	unsigned int inum;
};

struct net {
	struct ns_common ns;
};

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	possible_net_t nd_net;
};

struct skb_shared_info {
	unsigned short gso_size;
	unsigned short gso_segs;
};

struct sk_buff {
	struct net_device *dev;
	unsigned int len;
	unsigned int data_len;
	__be16 protocol;
	__u16 network_header;
	unsigned int end; /* sk_buff_data_t: an offset from head on 64-bit */
	unsigned char *head;
	unsigned char *data;
};

#pragma clang attribute pop

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IPPROTO_HOPOPTS 0
/* Bytes read from the IP header on: IPv6, a jumbo hop-by-hop header, and
 * the TCP ports and data offset. */
#define HDR_READ 64

/* The broker's network namespace (its inode number); 0 counts every
 * namespace. Set by the loader. */
const volatile __u32 targ_netns = 0;

/* The broker's TCP ports, one bit per port. Set by the loader. */
const volatile __u64 port_bits[1024] = {};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct gso_key);
	__type(value, struct gso_hist);
} hists SEC(".maps");

/* A zeroed histogram to create entries from: the value is larger than the
 * BPF stack. Never written. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gso_hist);
} zero SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct netstack_stats);
} stats SEC(".maps");

/* Make the types visible to bpf2go -type. */
const struct gso_key *unused_gso_key __attribute__((unused));
const struct gso_hist *unused_gso_hist __attribute__((unused));
const struct netstack_stats *unused_netstack_stats __attribute__((unused));

static __always_inline struct netstack_stats *this_cpu(void)
{
	__u32 z = 0;
	return bpf_map_lookup_elem(&stats, &z);
}

static __always_inline bool is_port(__u32 port)
{
	/* The port comes out of a byte swap, which the verifier cannot bound:
	 * keep the compiler from folding the check away. */
	__u32 word = port >> 6;
	barrier_var(word);
	if (word >= 1024)
		return false;
	return (port_bits[word] >> (port & 63)) & 1;
}

struct iphdr4 {
	__u8 ver_ihl;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	__u8 ttl;
	__u8 protocol;
};

struct tcphdr_start {
	__be16 source;
	__be16 dest;
	__be32 seq;
	__be32 ack_seq;
	__u8 doff_res; /* data offset in the high nibble */
};

static __always_inline int count_skb(struct sk_buff *skb, struct net_device *dev, const __u32 dir, const bool btf)
{
	if (!dev)
		return 0;
	if (targ_netns) {
		__u32 inum = btf ? dev->nd_net.net->ns.inum : BPF_CORE_READ(dev, nd_net.net, ns.inum);
		if (inum != targ_netns)
			return 0;
	}
	__u16 proto = RD(btf, skb, protocol);
	if (proto != bpf_htons(ETH_P_IP) && proto != bpf_htons(ETH_P_IPV6))
		return 0;

	unsigned char *head = RD(btf, skb, head);
	unsigned char *data = RD(btf, skb, data);
	__u32 len = RD(btf, skb, len);
	__u32 headlen = len - RD(btf, skb, data_len);

	/* Where the IP header starts, from data: on receive the device layer
	 * has pulled the link header already; on transmit data still points at
	 * it and network_header says where IP starts. */
	long nhoff = 0;
	if (dir == NETSTACK_OUT) {
		__u16 nh = RD(btf, skb, network_header);
		nhoff = (long)(head + nh) - (long)data;
	}
	struct netstack_stats *st;
	if (nhoff < 0 || nhoff > 256)
		goto unparsed;

	/* One read for the IP header and the start of the TCP header (the
	 * common case); a second only for IPv4 with options. */
	unsigned char *ip = data + nhoff;
	long avail = (long)headlen - nhoff;
	if (avail < 20) /* shorter than an IPv4 header */
		goto unparsed;
	__u64 n = avail > HDR_READ ? HDR_READ : avail;
	barrier_var(n);
	n &= 127; /* no-op that bounds n for the verifier */
	union {
		__u8 b[128];
		struct iphdr4 v4;
	} h;
	if (bpf_probe_read_kernel(&h, n, ip))
		goto unparsed;
	__u32 iphl;
	struct tcphdr_start th;
	if (proto == bpf_htons(ETH_P_IP)) {
		if (h.v4.protocol != IPPROTO_TCP)
			return 0;
		if ((h.v4.ver_ihl >> 4) != 4 || (h.v4.ver_ihl & 15) < 5)
			goto unparsed;
		/* A non-first fragment has no TCP header. */
		if (h.v4.frag_off & bpf_htons(0x1fff))
			return 0;
		iphl = (h.v4.ver_ihl & 15) * 4;
		if (iphl + 20 > avail)
			goto unparsed;
		if (iphl == 20)
			__builtin_memcpy(&th, &h.b[20], sizeof(th));
		else if (bpf_probe_read_kernel(&th, sizeof(th), ip + iphl))
			goto unparsed;
	} else {
		if (avail < 40)
			goto unparsed;
		iphl = 40;
		if (h.b[6] == IPPROTO_HOPOPTS) {
			/* BIG TCP: skbs over 64 KiB carry a hop-by-hop header with
			 * the jumbo payload option (still so on Linux 6.18, also at
			 * the packet taps). Other extension headers are not
			 * followed: such skbs are not counted as TCP. */
			if (avail < 48)
				goto unparsed;
			if (h.b[40] != IPPROTO_TCP)
				return 0;
			iphl = 48 + h.b[41] * 8;
		} else if (h.b[6] != IPPROTO_TCP) {
			return 0;
		}
		if (iphl + 20 > avail)
			goto unparsed;
		if (iphl == 40)
			__builtin_memcpy(&th, &h.b[40], sizeof(th));
		else if (iphl == 48)
			__builtin_memcpy(&th, &h.b[48], sizeof(th));
		else if (bpf_probe_read_kernel(&th, sizeof(th), ip + iphl))
			goto unparsed;
	}
	__u16 port = bpf_ntohs(dir == NETSTACK_IN ? th.dest : th.source);
	if (!is_port(port))
		return 0;
	__u32 hdrs = (__u32)nhoff + iphl + (th.doff_res >> 4) * 4;
	__u64 payload = len > hdrs ? len - hdrs : 0;

	struct skb_shared_info *sh = (struct skb_shared_info *)(head + RD(btf, skb, end));
	__u16 gso_size = BPF_CORE_READ(sh, gso_size);
	__u32 segs = 1;
	if (gso_size) {
		segs = BPF_CORE_READ(sh, gso_segs);
		if (!segs)
			segs = payload ? (payload + gso_size - 1) / gso_size : 1;
	}

	struct gso_key key = { .ifindex = RD(btf, dev, ifindex), .dir = dir };
	struct gso_hist *hist = bpf_map_lookup_elem(&hists, &key);
	if (!hist) {
		__u32 z = 0;
		struct gso_hist *init = bpf_map_lookup_elem(&zero, &z);
		/* BPF_NOEXIST: another CPU may have created it meanwhile. */
		if (init)
			bpf_map_update_elem(&hists, &key, init, BPF_NOEXIST);
		hist = bpf_map_lookup_elem(&hists, &key);
		if (!hist) {
			st = this_cpu();
			if (st)
				st->map_full++;
			return 0;
		}
	}
	__u64 idx = segs;
	barrier_var(idx);
	if (idx > NETSTACK_BUCKETS)
		idx = NETSTACK_BUCKETS;
	hist->skbs[idx]++;
	hist->segs += segs;
	hist->payload_bytes += payload;
	if (gso_size)
		hist->gso_skbs++;
	if (segs > hist->max_segs)
		hist->max_segs = segs;
	st = this_cpu();
	if (st)
		st->matched++;
	return 0;

unparsed:
	st = this_cpu();
	if (st)
		st->unparsed++;
	return 0;
}

/* tp_btf path. */

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(xmit_btf, struct sk_buff *skb, struct net_device *dev)
{
	return count_skb(skb, dev, NETSTACK_OUT, true);
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(receive_btf, struct sk_buff *skb)
{
	return count_skb(skb, skb->dev, NETSTACK_IN, true);
}

/* raw_tp path: same arguments, untrusted pointers. */

SEC("raw_tp/net_dev_start_xmit")
int BPF_PROG(xmit_raw, struct sk_buff *skb, struct net_device *dev)
{
	return count_skb(skb, dev, NETSTACK_OUT, false);
}

SEC("raw_tp/netif_receive_skb")
int BPF_PROG(receive_raw, struct sk_buff *skb)
{
	return count_skb(skb, BPF_CORE_READ(skb, dev), NETSTACK_IN, false);
}
