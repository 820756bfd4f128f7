/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Layout shared between bpf/netstack.bpf.c and its Go loader
 * (probes/netstack, through bpf2go -type). Changing a struct here changes
 * the Go types on the next `make generate`.
 */
#ifndef BROKERTRACE_NETSTACK_H
#define BROKERTRACE_NETSTACK_H

/*
 * Segments per skb are counted exactly from 0 to NETSTACK_BUCKETS-1; skbs
 * with more segments go to the last slot, skbs[NETSTACK_BUCKETS], and still
 * count fully in segs and max_segs. 128 covers every standard GSO/GRO skb
 * (64 KiB over the smallest IPv4 MSS, 536, is 123 segments); only BIG TCP
 * (gso_max_size above 64 KiB) can reach the last slot.
 */
#define NETSTACK_BUCKETS 128

enum netstack_dir {
	NETSTACK_IN = 0,  /* received for one of the ports, after GRO (netif_receive_skb) */
	NETSTACK_OUT = 1, /* sent from one of the ports, handed to the device (net_dev_start_xmit) */
};

/* Hash key of one histogram: an interface and a direction. */
struct gso_key {
	__u32 ifindex;
	__u32 dir; /* enum netstack_dir */
};

/* One histogram (per-CPU hash value; user space sums the CPUs and takes
 * the largest max_segs). */
struct gso_hist {
	__u64 skbs[NETSTACK_BUCKETS + 1]; /* [n]: skbs carrying n TCP segments; last slot: n >= NETSTACK_BUCKETS */
	__u64 segs;          /* sum of segments over all skbs, exact */
	__u64 payload_bytes; /* sum of TCP payload bytes */
	__u64 gso_skbs;      /* skbs with gso_size set (GSO/TSO or GRO skbs), even with one segment */
	__u64 max_segs;      /* most segments in one skb */
};

/* Per-CPU health counters (per-CPU array, one slot). */
struct netstack_stats {
	__u64 matched;   /* skbs counted in a histogram */
	__u64 unparsed;  /* skbs of the namespace whose IP/TCP headers were not in the linear area or unreadable */
	__u64 map_full;  /* matched skbs lost because the histogram map was full */
};

#endif /* BROKERTRACE_NETSTACK_H */
