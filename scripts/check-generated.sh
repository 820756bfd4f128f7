#!/usr/bin/env bash
# Fails when the committed bpf2go output (probes/*/*_bpfel.{go,o}, amd64's
# NAME_x86_* and arm64's NAME_arm64_*) is stale:
# regenerates it from bpf/ (bpf/NAME.bpf.c and NAME.h, shared headers in
# bpf/include/) in a scratch copy of the tree with Debian's clang
# and compares byte for byte. bpf2go maps source paths to relative ones, so
# the output does not depend on where the tree lives.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$top/go.mod" "$top/go.sum" "$top/bpf" "$top/probes" "$tmp/"
(cd "$tmp" && go generate ./probes/...)
stale=0
while IFS= read -r f; do
	rel=${f#"$tmp/"}
	if ! cmp -s "$f" "$top/$rel"; then
		echo "stale: $rel (run 'make generate' and commit the result)" >&2
		stale=1
	fi
done < <(find "$tmp/probes" -name '*_bpfel.*')
[ "$stale" = 0 ] && echo "generated BPF objects are up to date"
# The socket probe's system call numbers (NR_* in bpf/sockio.bpf.c) must
# be each architecture's: those clang sees for the arm64 and the x86
# objects against __NR_* of the kernel's own headers (linux-libc-dev).
nr() {
	clang -E -dM -target bpf "-D__TARGET_ARCH_$1" -I"$top/bpf/include" "$top/bpf/sockio.bpf.c" |
		awk '$1 == "#define" && $2 ~ /^NR_/ { print substr($2, 4), $3 }' | sort
}
sysnr() { # names: the NR_ of the probe; header: the architecture's table
	# (an alias such as arm64's __NR_sendfile -> __NR3264_sendfile resolved)
	while read -r name _; do
		awk -v n="__NR_$name" '$1 == "#define" { v[$2] = $3 }
			END { x = v[n]; if (x in v) x = v[x]; print substr(n, 6), x }' "$1"
	done | sort
}
for arch in "arm64 /usr/include/asm-generic/unistd.h" "x86 /usr/include/x86_64-linux-gnu/asm/unistd_64.h"; do
	set -- $arch
	if ! diff <(nr "$1") <(nr "$1" | sysnr "$2") >&2; then
		echo "bpf/sockio.bpf.c: NR_* for $1 differ from $2 (left: the probe's)" >&2
		stale=1
	fi
done
exit "$stale"
