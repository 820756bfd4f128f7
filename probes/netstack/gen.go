package netstack

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type gso_key -type gso_hist -type netstack_stats netstack ../../bpf/netstack.bpf.c -- -I../../bpf/include
