/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What more than one of brokertrace's probes uses beside the kernel types
 * of vmlinux.h: the constants of the socket API, which BTF does not carry
 * (they are macros in the kernel), and the read that lets one program body
 * serve both the tp_btf and the raw_tp path.
 */
#ifndef BROKERTRACE_H
#define BROKERTRACE_H

#include <bpf/bpf_core_read.h>

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define SOCK_STREAM 1

/* Read a field: a plain load for tp_btf's trusted pointers, a CO-RE probe
 * read for raw_tp. btf is a constant after inlining, so the other arm is
 * compiled away. */
#define RD(btf, p, field) ((btf) ? (p)->field : BPF_CORE_READ(p, field))

#endif /* BROKERTRACE_H */
