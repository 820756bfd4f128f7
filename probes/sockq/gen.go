package sockq

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type sq_event -type sq_stats sockq ../../bpf/sockq.bpf.c -- -I../../bpf/include
