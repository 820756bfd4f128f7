package sched

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type thread_stats -type cpu_stats -type sched_event sched ../../bpf/sched.bpf.c -- -I../../bpf/include
