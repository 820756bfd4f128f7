/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The few kernel types brokertrace's probes use, written by hand instead of a
 * full vmlinux.h dump. Every struct carries preserve_access_index, so field
 * offsets are relocated against the running kernel's BTF at load time
 * (CO-RE): only the fields named here must exist, in any order or offset.
 */
#ifndef BROKERTRACE_VMLINUX_H
#define BROKERTRACE_VMLINUX_H

typedef unsigned char __u8;
typedef signed char __s8;
typedef unsigned short __u16;
typedef short __s16;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
enum { false = 0, true = 1 };

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
};

/* Ring buffer flags and queries (uapi). */
enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
};
enum {
	BPF_RB_AVAIL_DATA = 0,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

/* Registers saved at system-call entry: the user's arguments. */
#if defined(__TARGET_ARCH_x86)
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax;
	unsigned long ip, cs, flags, sp, ss;
};
#elif defined(__TARGET_ARCH_arm64)
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp, pc, pstate;
};
struct pt_regs {
	union {
		struct user_pt_regs user_regs;
		struct {
			__u64 regs[31];
			__u64 sp, pc, pstate;
		};
	};
	__u64 orig_x0;
	__s32 syscallno;
};
#else
#error "brokertrace supports x86_64 and arm64"
#endif

struct sock_common {
	union {
		struct {
			__be32 skc_daddr;
			__be32 skc_rcv_saddr;
		};
	};
	union {
		struct {
			__be16 skc_dport;
			__u16 skc_num;
		};
	};
	unsigned short skc_family;
};

struct sock {
	struct sock_common __sk_common;
	__u16 sk_type;
	__u16 sk_protocol;
};

struct tcp_sock {
	__u32 rcv_nxt;
	__u32 copied_seq;
	__u32 snd_nxt;
	__u32 write_seq;
};

struct socket {
	struct sock *sk;
};

struct inode {
	unsigned short i_mode;
};

struct file {
	struct inode *f_inode;
	void *private_data;
};

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
};

struct files_struct {
	struct fdtable *fdt;
};

/* CPU time the scheduler has charged to a task (sched probe). */
struct sched_entity {
	__u64 sum_exec_runtime;
};

struct task_struct {
	unsigned int flags;
	int pid;
	int tgid;
	char comm[16];
	struct files_struct *files;
	/* Context-switch counters behind /proc/<pid>/task/<tid>/status
	 * voluntary_ctxt_switches / nonvoluntary_ctxt_switches (sched probe). */
	unsigned long nvcsw;
	unsigned long nivcsw;
	struct sched_entity se;
	int on_cpu; /* 1 from switch-in until its switch-out completes */
};

#pragma clang attribute pop

/*
 * User-space ABI structs, read from user memory with bpf_probe_read_user:
 * their layout is the system-call ABI, fixed, so no CO-RE relocation.
 */
struct bt_iovec {
	__u64 iov_base;
	__u64 iov_len;
};

struct bt_user_msghdr {
	__u64 msg_name;
	__u32 msg_namelen;
	__u32 _pad;
	__u64 msg_iov;
	__u64 msg_iovlen;
};

#endif /* BROKERTRACE_VMLINUX_H */
