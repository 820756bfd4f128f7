package sockio

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type bt_event -type bt_stats -type bt_marker sockio ../../bpf/sockio.bpf.c -- -I../../bpf/include
