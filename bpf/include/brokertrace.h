/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What more than one of brokertrace's probes uses beside the kernel types
 * of vmlinux.h: the constants of the socket API, which BTF does not carry
 * (they are macros in the kernel), and the read that lets one program body
 * serve both the tp_btf and the raw_tp path.
 */
#ifndef BROKERTRACE_H
#define BROKERTRACE_H

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define SOCK_STREAM 1

/* Read a field: a plain load for tp_btf's trusted pointers, a CO-RE probe
 * read for raw_tp. btf is a constant after inlining, so the other arm is
 * compiled away. */
#define RD(btf, p, field) ((btf) ? (p)->field : BPF_CORE_READ(p, field))

/* RING_REC is what a record of size bytes takes of a ring buffer: its
 * 8-byte header, and the record rounded up to 8 bytes. */
#define RING_REC(size) ((((__u64)(size)) + 8 + 7) & ~7ULL)

/* ring_wake gives the flags of the record (or the call's last record)
 * that brings the data waiting in a ring from avail to avail + bytes: a
 * wake-up of the reader only when that crosses a multiple of every (the
 * loader's wakeup_bytes, an eighth of the ring). A wake-up is an irq_work,
 * a self-IPI on the CPU of the traced task: waking for every record while
 * more than every bytes waited made each record pay one as soon as the
 * reader fell behind, and the kernel's default (flags 0) wakes for every
 * record that finds the reader caught up. On a paravirtualised machine,
 * where the APIC write is a hypercall, either doubled or tripled the
 * socket probe's run time for whole recordings. A crossing missed by two
 * CPUs' records at once is caught at the next multiple, and the reader
 * polls besides (probes.RingPoll). */
static __always_inline __u64 ring_wake(__u64 avail, __u64 bytes, __u64 every)
{
	if (!every || avail / every == (avail + bytes) / every)
		return BPF_RB_NO_WAKEUP;
	return BPF_RB_FORCE_WAKEUP;
}

/* RING_WAKE is ring_wake's flags for a record of size bytes about to be
 * written to ring, in a program that declares wakeup_bytes (every probe
 * that writes a ring buffer: its loader sets it, probes.SizeRing). */
#define RING_WAKE(ring, size) ring_wake(bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA), RING_REC(size), wakeup_bytes)

#endif /* BROKERTRACE_H */
