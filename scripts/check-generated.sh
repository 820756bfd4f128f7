#!/usr/bin/env bash
# Fails when the committed bpf2go output (probes/*/*_bpfel.{go,o}) is stale:
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
exit "$stale"
