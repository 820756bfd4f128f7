#!/usr/bin/env bash
# make mutate: a mutation check of the kernel marker scanner. Each mutant
# below is one small change to bpf/sockio.bpf.c's marker grammar and scan
# code. In a scratch copy of the tree, the script applies one mutant at a
# time, regenerates that copy's BPF object (go generate, as
# scripts/check-generated.sh does), and runs the socket probe's marker tests
# there. A mutant the tests pass on has survived: the script prints every
# survivor and exits 1. A mutant that does not compile, or that the verifier
# rejects, is an error in this list (exit 2): it would die for the wrong
# reason. The tree itself is never changed. Needs root (the tests load eBPF);
# takes a few minutes.
#
#   MUTATE_ONLY=name,...  run only these mutants
#   MUTATE_RUN=regexp     tests to run (default: the marker tests below)
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin
top=$(cd "$(dirname "$0")/.." && pwd)
src=bpf/sockio.bpf.c
tests=${MUTATE_RUN:-'^(TestScanNearMisses|TestSyscallForms|TestSplitMarker|TestRandomAgainstReference|TestBurst|TestManyIovecs|TestScanLimit)$'}

# name :: text in sockio.bpf.c (found exactly once) => its replacement
mutants=$(
	cat <<'EOF'
hexval-accepts-g :: ch <= 'f') => ch <= 'g')
hexval-accepts-backtick :: ch >= 'a' && => ch >= '`' &&
hexval-rejects-0 :: ch >= '0' && => ch > '0' &&
hexval-uppercase :: if (ch >= 'a' && ch <= 'f') => ch |= 0x20; if (ch >= 'a' && ch <= 'f')
try-marker-only-BTI :: if (*(__u32 *)&c->buf[p] != 0x44495442) => if ((*(__u32 *)&c->buf[p] & 0xffffff) != 0x495442)
try-marker-digit-unchecked :: int v = hexval(c->buf[p + 4 + i]); => int v = hexval(c->buf[p + 4 + i]) & 15;
try-marker-chunk-end :: if (p > HEAD + SCAN_CHUNK - BT_MARKER_LEN) => if (p >= HEAD + SCAN_CHUNK - BT_MARKER_LEN)
check-word-end :: p + BT_MARKER_LEN <= end) => p + BT_MARKER_LEN < end)
check-word-start :: p >= start && => p > start &&
check-word-7-bytes :: for (__u32 j = 0; j < 8; j++) { => for (__u32 j = 0; j < 7; j++) {
scan-digit-range :: x + 0x5050505050505050ULL => x + 0x4f4f4f4f4f4f4f4fULL
scan-word-before :: __u64 po = o - 8; => __u64 po = o - 16;
scan-pair-test :: ~x & 0x8080808080808080ULL) == 0x8080808080808080ULL => ~x & 0x8080808080808080ULL) != 0x8080808080808080ULL
scan-full-chunk :: if (len == 0 || len > SCAN_CHUNK) => if (len == 0 || len >= SCAN_CHUNK)
scan-carried-start :: __u32 start = HEAD - cl; => __u32 start = HEAD - cl + 1;
carry-3-words :: for (__u64 k = 0; k < 4; k++) { => for (__u64 k = 0; k < 3; k++) {
carry-last-word :: if (wi * 8 >= end || => if (wi * 8 + 8 >= end ||
carry-18-bytes :: for (__u32 k = 1; k <= BT_CARRY_MAX; k++) { => for (__u32 k = 1; k < BT_CARRY_MAX; k++) {
carry-prefix-D :: (i == 3 && ch != 'D') => (i == 3 && ch == 'D')
carry-saved-bytes :: c->carry[2] = *(__u64 *)&c->buf[len + 16]; => c->carry[2] = *(__u64 *)&c->buf[len + 15];
EOF
)

[ "$(id -u)" = 0 ] || { echo "mutate: run as root: the tests load eBPF programs" >&2; exit 4; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -a "$top" "$tmp/repo"
cd "$tmp/repo"
cp "$src" "$tmp/orig.c"

# apply NAME OLD NEW: replace the one occurrence of OLD in a fresh copy of
# the source.
apply() {
	cp "$tmp/orig.c" "$src"
	OLD=$2 NEW=$3 perl -0777 -i -pe '
		my $n = () = /\Q$ENV{OLD}\E/g;
		die "found $n times\n" if $n != 1;
		s/\Q$ENV{OLD}\E/$ENV{NEW}/;' "$src" || { echo "mutate: $1: '$2' must occur exactly once in $src" >&2; exit 2; }
}

# run NAME: regenerate the object and run the tests; returns the tests'
# status, their output in $tmp/out.
run() {
	if ! go generate ./probes/sockio >"$tmp/out" 2>&1; then
		cat "$tmp/out" >&2
		echo "mutate: $1 does not compile" >&2
		exit 2
	fi
	go test -count=1 -p 1 -failfast -timeout 10m -run "$tests" ./probes/sockio/ >"$tmp/out" 2>&1
}

start=$SECONDS
if ! run unmutated; then
	cat "$tmp/out" >&2
	echo "mutate: the tests fail on the unmutated code" >&2
	exit 2
fi
survivors=()
n=0
while IFS= read -r line; do
	name=${line%% :: *}
	rest=${line#* :: }
	old=${rest%% => *}
	new=${rest#* => }
	if [ -n "${MUTATE_ONLY:-}" ] && [[ ",$MUTATE_ONLY," != *",$name,"* ]]; then
		continue
	fi
	n=$((n + 1))
	apply "$name" "$old" "$new"
	t0=$SECONDS
	if run "$name"; then
		echo "SURVIVED  $name: $old => $new"
		survivors+=("$name")
	elif grep -q ': Open({' "$tmp/out"; then
		grep -m1 ': Open({' "$tmp/out" | cut -c1-300 >&2
		echo "mutate: $name: the program does not load (verifier)" >&2
		exit 2
	else
		killer=$(grep -m1 -- '--- FAIL: ' "$tmp/out" | sed 's/^ *--- FAIL: //; s/ (.*//')
		echo "killed    $name by $killer ($((SECONDS - t0))s)"
	fi
done <<<"$mutants"
cp "$tmp/orig.c" "$src"
echo "mutate: $n mutants, ${#survivors[@]} survived, $((SECONDS - start))s"
[ ${#survivors[@]} = 0 ]
