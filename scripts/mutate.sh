#!/usr/bin/env bash
# make mutate: a mutation check of the socket probe's two in-kernel
# parsers. Each mutant below is one small change to the marker scanner
# (bpf/sockio.bpf.c) or to the protocol frame parser (bpf/frame.bpf.h). In
# a scratch copy of the tree, the script applies one mutant at a time,
# regenerates that copy's BPF object (go generate, as
# scripts/check-generated.sh does), and runs the socket probe's tests of
# that parser there. A mutant the tests pass on has survived: the script
# prints every survivor and exits 1. A mutant that does not compile, or that
# the verifier rejects, is an error in this list (exit 2): it would die for
# the wrong reason. The tree itself is never changed. Needs root (the tests
# load eBPF); takes a few minutes per parser.
#
#   scripts/mutate.sh [marker|frame|all]   the parser(s) to mutate (all)
#   MUTATE_ONLY=name,...  run only these mutants
#   MUTATE_RUN=regexp     tests to run (default: the parser's tests below)
#
# A mutant is "name :: text => replacement"; the text must occur exactly
# once in the source. In both, \N stands for a line break and \T for a tab.
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin
top=$(cd "$(dirname "$0")/.." && pwd)
which=${1:-all}

marker_src=bpf/sockio.bpf.c
marker_tests='^(TestScanNearMisses|TestSyscallForms|TestSplitMarker|TestRandomAgainstReference|TestBurst|TestManyIovecs|TestScanLimit|TestRingWakeupsBehind)$'
marker_mutants=$(
	cat <<'EOF'
hexval-accepts-g :: ch <= 'f') => ch <= 'g')
hexval-accepts-backtick :: if (ch >= 'a' && => if (ch >= '`' &&
hexval-rejects-0 :: if (ch >= '0' && => if (ch > '0' &&
try-marker-only-BTI :: if (*(__u32 *)m != 0x44495442) => if ((*(__u32 *)m & 0xffffff) != 0x495442)
try-marker-15-digits :: for (int i = 0; i < 16; i++) { => for (int i = 0; i < 15; i++) {
check-cand-end :: p + BT_MARKER_LEN <= end) => p + BT_MARKER_LEN < end)
check-cand-start :: if (b[j] == 'B' && p >= start && => if (b[j] == 'B' && p > start &&
check-cand-12-bytes :: for (__u32 j = 0; j < STRIDE; j++) { => for (__u32 j = 0; j < STRIDE - 1; j++) {
far-range-low :: ((x - 0x30 * ONES) | (x + 0x19 * ONES)) & HIGHS => ((x - 0x31 * ONES) | (x + 0x19 * ONES)) & HIGHS
far-range-high :: ((x - 0x30 * ONES) | (x + 0x19 * ONES)) & HIGHS => ((x - 0x30 * ONES) | (x + 0x1a * ONES)) & HIGHS
block-b-6-words :: for (__u32 k = 0; k < 7; k++) { => for (__u32 k = 0; k < 6; k++) {
carry-18-bytes :: for (__u32 k = 1; k <= BT_CARRY_MAX; k++) { => for (__u32 k = 1; k < BT_CARRY_MAX; k++) {
carry-prefix-D :: (i == 3 && ch != 'D') => (i == 3 && ch == 'D')
carry-3-words :: for (__u64 k = 0; k < 4; k++) { => for (__u64 k = 0; k < 3; k++) {
carry-saved-bytes :: c->carry[2] = load64(b + 16); => c->carry[2] = load64(b + 15);
stage-carried-start :: return HEAD - cl; => return HEAD - cl + 1;
scan-full-chunk :: if (len == 0 || len > SCAN_CHUNK) => if (len == 0 || len >= SCAN_CHUNK)
wake-above-threshold :: RING_WAKE(&events, size)) => (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP))
EOF
)

frame_src=bpf/frame.bpf.h
frame_tests='^(TestKernelFrames|TestKernelFramesTLS|TestKernelFramesJoined|TestKernelFramesMQTT|TestKernelFramesSTOMP|TestKernelFramesRedis|TestKernelFramesAMQP|TestRingWakeupsHeld)$'
frame_mutants=$(
	cat <<'EOF'
space-no-tab :: return ch == ' ' || ch == '\t' || => return ch == ' ' ||
held-wake-default :: RING_WAKE(&events, sizeof(c->fs.held))) => 0)
verb-case :: (ch >= 'a' && ch <= 'z' ? ch - 32 : ch) => (ch)
pub-fields :: w == W3('P', 'U', 'B') && (nf == 3 || nf == 4) => w == W3('P', 'U', 'B') && (nf == 3)
hpub-sizes :: (nf == 4 || nf == 5) && n0 && n1 && v0 <= v1 => (nf == 4 || nf == 5) && n0 && n1 && v0 < v1
msg-fields :: w == W3('M', 'S', 'G') && (nf == 4 || nf == 5) => w == W3('M', 'S', 'G') && (nf == 4)
hmsg-fields :: (nf == 5 || nf == 6) => (nf == 5 || nf == 7)
max-header :: fs->line = line;\N\Tif (line >= MAX_HEADER) { => fs->line = line;\N\Tif (line > MAX_HEADER) {
max-payload :: ch > '9' || v > MAX_PAYLOAD) => ch > '9' || v > 2 * MAX_PAYLOAD)
size-digits :: if (ch < '0' || ch > '9' || => if (ch < '0' || ch > ':' ||
crlf-cr :: if (ch == '\r') {\N\T\T\Tfs->state = F_LF;\N\T\T\Treturn;\N\T\T}\N\T\Tframe_bad(fs, st, d);\N\T\Tst->frame_skipped[d] += 1;\N\T\Treturn;\N\Tcase F_LF:\N\T\Tif (ch == '\n') {\N\T\T\Tframe_confirm => if (ch == '\r' || ch == '\n') {\N\T\T\Tfs->state = F_LF;\N\T\T\Treturn;\N\T\T}\N\T\Tframe_bad(fs, st, d);\N\T\Tst->frame_skipped[d] += 1;\N\T\Treturn;\N\Tcase F_LF:\N\T\Tif (ch == '\n') {\N\T\T\Tframe_confirm
crlf-lf :: if (ch == '\n') {\N\T\T\Tframe_confirm(d, 1); => if (ch != '\r') {\N\T\T\Tframe_confirm(d, 1);
sync-resync :: st->frame_skipped[d] += 1;\N\T\Tif (ch == '\n') {\N\T\T\Tst->frame_resyncs[d] += 1;\N\T\T\Tline_reset(fs); => st->frame_skipped[d] += 1;\N\T\Tif (ch == '\r') {\N\T\T\Tst->frame_resyncs[d] += 1;\N\T\T\Tline_reset(fs);
empty-line :: if (line > 0) { => if (line > 1) {
fold-lane-3 :: h = (h ^ fs->fp[3]) * FNV_PRIME; => h = (h ^ fs->fp[2]) * FNV_PRIME;
block-lane-3 :: h3 = (h3 ^ load64(b + 24)) * FNV_PRIME; => h3 = (h3 ^ load64(b + 16)) * FNV_PRIME;
lead-words :: if ((c->fs.nw & 3) == 0 || n - i < 8 || i > n) => if ((c->fs.nw & 3) == 1 || n - i < 8 || i > n)
tail-words :: if (n - i < 8 || i > n) => if (n - i < 16 || i > n)
byte-word :: fs->fp[j] = (fs->fp[j] ^ pw) * FNV_PRIME; => fs->fp[j] = fs->fp[j] * FNV_PRIME;
payload-end :: m->end = c->seg_base + o - HEAD; => m->end = c->seg_base + o - HEAD + 1;
tls-version :: ch >= 0x01 && ch <= 0x04 => ch >= 0x01 && ch <= 0x05
held-call :: if (fl & FF_HELD_NOW) { => if (fl & (FF_HELD_NOW | FF_HELD)) {
joined-sync :: f->state = f->proto == BT_PROTO_MQTT ? F_DEAD : F_SYNC; => f->state = f->proto == BT_PROTO_MQTT ? F_DEAD : F_LINE;
mqtt-flags :: return typ == 6 || typ == 8 || typ == 10 ? 2 : 0; => return typ == 6 || typ == 8 ? 2 : 0;
mqtt-qos-3 :: } else if (((fs->word >> 1) & 3) == 3) { => } else if (((fs->word >> 1) & 3) == 4) {
mqtt-pid :: if (fs->vlen > 0)\N\T\Tfs->state = F_MQ_PID; => if (fs->vlen > 1)\N\T\Tfs->state = F_MQ_PID;
mqtt-varint :: *v = *v | ((__u64)(ch & 0x7f) << (7 * (k & 3))); => *v = *v | ((__u64)(ch & 0x7f) << (8 * (k & 3)));
mqtt-v5-props :: else if (fs->mqv == 5)\N\T\Tfs->state = F_MQ_PROPS; => else if (fs->mqv == 6)\N\T\Tfs->state = F_MQ_PROPS;
mqtt-rem :: if (hlen + props > rem) { => if (hlen + props > rem + 1) {
mqtt-level :: if (ch < 3 || ch > 5) { => if (ch < 4 || ch > 5) {
mqtt-connect-rest :: mqtt_skip(c, fs, fs->num[0] - (2 + fs->num[1] + 1), o); => mqtt_skip(c, fs, fs->num[0] - (2 + fs->num[1]), o);
stomp-cr-kept :: fs->sflags |= ST_CR;\N\T} else { => fs->sflags |= 0;\N\T} else {
stomp-cr-lost :: stomp_content(fs, '\r');\N\T\Tif (ch != '\r') { => if (ch != '\r') {
stomp-any-dest :: if (ST_IS(l, fs, ST_K_DESTINATION) && !(sf & ST_DEST)) { => if (ST_IS(l, fs, ST_K_DESTINATION)) {
stomp-any-cl :: } else if (ST_IS(l, fs, ST_K_CONTENT_LENGTH) && !(sf & ST_CL)) { => } else if (ST_IS(l, fs, ST_K_CONTENT_LENGTH)) {
stomp-empty-cl :: ((sf & ST_NODIG) || fs->num[0] > MAX_PAYLOAD) => (fs->num[0] > MAX_PAYLOAD)
stomp-colon-in-value :: if (fs->field == 0 || !(sf & ST_VAL)) { => if (fs->field == 0 || !(sf & ST_VAL) || ch == ':') {
stomp-command :: if (ST_IS(l, fs, ST_K_MESSAGE))\N\T\Treturn 1; => if (ST_IS(l, fs, ST_K_MESSAGE) || ST_IS(l, fs, ST_K_ERROR))\N\T\Treturn 1;
stomp-max-header :: (fs->state == F_ST_HDR && line >= MAX_HEADER) => (fs->state == F_ST_HDR && line > MAX_HEADER)
stomp-nul-resync :: if (line > 1) { /* else => if (line > 0) { /* else
stomp-body-end :: h->markers[0].end = h->bytes;\N\T\Tfs->flags &= ~FF_HELD_NOW; => fs->flags &= ~FF_HELD_NOW;
stomp-no-stash :: bool body = c->fs.state == F_ST_BODY && (c->fs.flags & FF_REC); => bool body = false;
stomp-skip-body :: fs->state = fs->skip ? F_PAYLOAD : F_ST_NUL; => fs->state = F_PAYLOAD;
stomp-trailer :: f->after_payload = proto == BT_PROTO_STOMP ? F_ST_NUL : => f->after_payload = proto == BT_PROTO_STOMP ? F_LINE :
redis-depth :: if (depth >= R_DEPTH)\N\T\Treturn false; => if (depth > R_DEPTH)\N\T\Treturn false;
redis-map-double :: if (t == '%' || t == '|')\N\T\Tn *= 2; => if (t == '%')\N\T\Tn *= 2;
redis-cand-size :: (t == '*' || t == '>') && (n == 3 || n == 4) => (t == '*' || t == '>') && (n == 3)
redis-cand-push :: (t == '*' || t == '>') && (n == 3 || n == 4) => (t == '*') && (n == 3 || n == 4)
redis-pmessage-want :: __u32 want = h == R_H_PMESSAGE ? 4 : 3; => __u32 want = 3;
redis-in-case :: (d == BT_DIR_IN && ch >= 'a' && ch <= 'z' ? ch - 32 : ch) => (d == BT_DIR_IN && ch >= 'a' && ch <= 'z' ? ch - 31 : ch)
redis-neg :: (!(rf & R_NEG) || n == -1) => (!(rf & R_NEG) || n < 0)
redis-max-header :: if (line + 1 + n > MAX_HEADER) => if (line + n > MAX_HEADER)
redis-line-max :: fs->line = line;\N\T\Tif (line >= MAX_HEADER) { => fs->line = line;\N\T\Tif (line > MAX_HEADER) {
redis-cr-inside :: if (rf & R_CR)\N\T\Trf |= R_BAD; => if (rf & R_CR)\N\T\Trf |= 0;
redis-scalar-kills :: if (fs->rdepth >= 1)\N\T\Tfs->rflags &= ~R_CAND; => if (fs->rdepth >= 2)\N\T\Tfs->rflags &= ~R_CAND;
redis-bulk-type :: fs->rdepth != 1 || t != '$') { => fs->rdepth != 1) {
amqp-max-frame :: if (size > AMQP_MAX_FRAME) => if (size > AMQP_MAX_FRAME + 1)
amqp-min-method :: if (size < 4)\N\T\T\Tgoto bad; => if (size < 3)\N\T\T\Tgoto bad;
amqp-hdr-min :: chan != fs->achan || size < 14) => chan != fs->achan || size < 13)
amqp-body-chan :: chan != fs->achan || size > fs->abody) => size > fs->abody)
amqp-body-over :: chan != fs->achan || size > fs->abody) => chan != fs->achan || size > fs->abody + 1)
amqp-deliver-ctag :: fs->acount = ch + 9; => fs->acount = ch + 8;
amqp-getok :: if (meth == 60 || meth == 71)\N\T\Treturn 1; => if (meth == 60)\N\T\Treturn 1;
amqp-return :: return meth == 50 ? 0 : -1; => return -1;
amqp-ex-separator :: fs->acount -= 1;\N\T\Tif (fs->acount == 0) {\N\T\T\Tfs->subj = (fs->subj ^ 0) * FNV_PRIME; => fs->acount -= 1;\N\T\Tif (fs->acount == 0) {
amqp-interleaved :: st->frame_interleaved[d] += 1; => st->frame_interleaved[d] += 0;
amqp-empty-body :: if (af & A_MSG)\N\T\T\Taf |= A_EMITEND; => if (af & 0)\N\T\T\Taf |= A_EMITEND;
amqp-resync :: if (ch == AMQP_FRAME_END) {\N\T\Tst->frame_resyncs[d] += 1;\N\T\Tfs->state = F_LINE;\N\T}\N} => if (ch == 0) {\N\T\Tst->frame_resyncs[d] += 1;\N\T\Tfs->state = F_LINE;\N\T}\N}
amqp-body-size :: if (i >= 11 && i <= 18) => if (i >= 11 && i <= 17)
stomp-fast-cr :: ch == '\r' || (sf & ST_CR) ||\N => ch == '\r' ||\N
stomp-fast-digit :: if (ch < '0' || ch > '9' || v > MAX_PAYLOAD)\N\T\T\Treturn false; => if (v > MAX_PAYLOAD)\N\T\T\Treturn false;
stomp-fast-nodig :: fs->sflags = sf & ~ST_NODIG;\N\T} else if (sf & ST_INDEST) { => } else if (sf & ST_INDEST) {
stomp-shift-key2 :: fs->key2 = (fs->key2 << 8) | (fs->word >> 56); => fs->key2 = fs->key2 << 8;
stomp-run-shift :: fs->word = ((fs->word << sh) << 1) | rev; => fs->word = (fs->word << sh) | rev;
stomp-run-key2 :: fs->key2 = ((fs->key2 << sh) << 1) | (fs->word >> (64 - 8 * k)); => fs->key2 = (fs->key2 << sh) << 1;
stomp-fast-line :: fs->line += 1;\N\Tfs->num[1] += 1;\N\Treturn true; => fs->num[1] += 1;\N\Treturn true;
amqp-fast-hdr :: if (s == F_A_HDR && i <= 5) { => if (s == F_A_HDR && i <= 6) {
amqp-fast-meth :: } else if (s == F_A_METH && i < 10) { => } else if (s == F_A_METH && i <= 10) {
amqp-fast-chdr :: } else if (s == F_A_CHDR && i < 20) { => } else if (s == F_A_CHDR && i <= 20) {
amqp-fast-aleft :: fs->aleft > 1 && fs->acount > 1 && => fs->aleft > 0 && fs->acount > 1 &&
amqp-fast-acount :: fs->aleft > 1 && fs->acount > 1 && => fs->aleft > 1 && fs->acount > 0 &&
stomp-run-cr :: m = zero_bytes(w) | zero_bytes(w ^ ('\n' * ONES)) | zero_bytes(w ^ ('\r' * ONES)); => m = zero_bytes(w) | zero_bytes(w ^ ('\n' * ONES));
stomp-run-colon :: m |= zero_bytes(w ^ (':' * ONES)); => m |= 0;
stomp-run-key-end :: stomp_key_end(fs, sf);\N\T\Treturn k + 1; => fs->sflags = sf | ST_VAL;\N\T\Treturn k + 1;
stomp-line-end-dest :: fs->sflags = sf & ~(ST_VAL | ST_INDEST | ST_INCL | ST_NODIG | ST_CR); => fs->sflags = sf & ~(ST_VAL | ST_INCL | ST_NODIG | ST_CR);
stomp-run-stale :: if (k > end - at)\N\T\Tk = end - at;\N\Tbool colon => bool colon
amqp-run-last :: k = fs->aleft;\N\T\Tk -= 1;\N\T\Tif (ph != AP_SKIP => k = fs->aleft;\N\T\Tif (ph != AP_SKIP
amqp-run-aleft :: if (fs->aleft < 2)\N\T\Treturn 0; => if (fs->aleft < 1)\N\T\Treturn 0;
amqp-run-arg-byte :: amqp_arg(fs, *AT(at, 0)); => amqp_arg(fs, *AT(at, 1));
amqp-fixed-last :: __u32 last = s == F_A_HDR ? 6 : => __u32 last = s == F_A_HDR ? 7 :
amqp-fixed-chdr-size :: s == F_A_METH ? 9 : 18); => s == F_A_METH ? 9 : 17);
amqp-fixed-hdr-chan :: be_append(fs->num[0], be, i, k, 1, 2); => be_append(fs->num[0], be, i, k, 1, 3);
be-append-shift :: (be >> (8 * (i + k - 1 - b))) => (be >> (8 * (i + k - b)))
amqp-run-hash :: fs->subj = fnv_bytes(fs->subj, LOAD(at, 0), k); => fs->subj = fnv_bytes(fs->subj, LOAD(at, 1), k);
redis-run-in-cmd :: if (cmd && (fs->dir & 1) == BT_DIR_IN)\N\T\Treturn 0; => if (0)\N\T\Treturn 0;
redis-run-last :: k -= 1;\N\Tif (k > 8)\N\T\Tk = 8; => if (k > 8)\N\T\Tk = 8;
run-fnv-order :: h = (h ^ ((w >> (8 * j)) & 0xff)) * FNV_PRIME; => h = (h ^ ((w >> (8 * (7 - j))) & 0xff)) * FNV_PRIME;
run-first-flag :: * 0x0001020304050607ULL) >> 56; => * 0x0102030405060708ULL) >> 56;
runs-tls :: if (fs->pos < 3 || at >= end)\N\T\T\Treturn 0; /* tls_byte => if (at >= end)\N\T\T\Treturn 0; /* tls_byte
EOF
)

[ "$(id -u)" = 0 ] || { echo "mutate: run as root: the tests load eBPF programs" >&2; exit 4; }
case $which in marker | frame | all) ;; *) echo "mutate: marker, frame or all, not $which" >&2; exit 2 ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/repo"
tar -C "$top" --exclude=./.cache --exclude=./bin -cf - . | tar -C "$tmp/repo" -xf -
cd "$tmp/repo"

# apply SRC NAME OLD NEW: replace the one occurrence of OLD in a fresh copy
# of SRC.
apply() {
	cp "$tmp/orig" "$1"
	OLD=$3 NEW=$4 perl -0777 -i -pe '
		my ($o, $n) = ($ENV{OLD}, $ENV{NEW});
		for ($o, $n) { s/\\N/\n/g; s/\\T/\t/g; }
		my $k = () = /\Q$o\E/g;
		die "found $k times\n" if $k != 1;
		s/\Q$o\E/$n/;' "$1" || { echo "mutate: $2: '$3' must occur exactly once in $1" >&2; exit 2; }
}

# run NAME TESTS: regenerate the object and run the tests; returns the
# tests' status, their output in $tmp/out.
run() {
	if ! go generate ./probes/sockio >"$tmp/out" 2>&1; then
		cat "$tmp/out" >&2
		echo "mutate: $1 does not compile" >&2
		exit 2
	fi
	go test -count=1 -p 1 -failfast -timeout 10m -run "$2" ./probes/sockio/ >"$tmp/out" 2>&1
}

# mutate SRC TESTS MUTANTS: every mutant of one parser.
mutate() {
	local src=$1 tests=${MUTATE_RUN:-$2} mutants=$3
	cp "$src" "$tmp/orig"
	if ! run unmutated "$tests"; then
		cat "$tmp/out" >&2
		echo "mutate: the tests fail on the unmutated $src" >&2
		exit 2
	fi
	while IFS= read -r line; do
		local name=${line%% :: *} rest=${line#* :: }
		local old=${rest%% => *} new=${rest#* => }
		if [ -n "${MUTATE_ONLY:-}" ] && [[ ",$MUTATE_ONLY," != *",$name,"* ]]; then
			continue
		fi
		n=$((n + 1))
		apply "$src" "$name" "$old" "$new"
		local t0=$SECONDS
		if run "$name" "$tests"; then
			echo "SURVIVED  $name: $old => $new"
			survivors+=("$name")
		elif grep -q ': Open({' "$tmp/out"; then
			grep -m1 ': Open({' "$tmp/out" | cut -c1-300 >&2
			echo "mutate: $name: the program does not load (verifier)" >&2
			exit 2
		else
			local killer
			killer=$(grep -m1 -- '--- FAIL: ' "$tmp/out" | sed 's/^ *--- FAIL: //; s/ (.*//')
			echo "killed    $name by $killer ($((SECONDS - t0))s)"
		fi
	done <<<"$mutants"
	cp "$tmp/orig" "$src"
}

start=$SECONDS
survivors=()
n=0
if [ "$which" != frame ]; then
	mutate "$marker_src" "$marker_tests" "$marker_mutants"
fi
if [ "$which" != marker ]; then
	mutate "$frame_src" "$frame_tests" "$frame_mutants"
fi
echo "mutate: $n mutants, ${#survivors[@]} survived, $((SECONDS - start))s"
[ ${#survivors[@]} = 0 ]
