#!/usr/bin/env bash
# make demo: start a real broker (nats-server from Debian), attach
# brokertrace to it, send marked messages through it, and print what
# brokertrace measured. Leaves the recording in demo-out/.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bt="$top/bin/brokertrace"
out="${DEMO_OUT:-$top/demo-out}"
count="${DEMO_COUNT:-20000}"
rate="${DEMO_RATE:-5000}"

[ "$(id -u)" = 0 ] || { echo "demo: run as root (sudo make demo): eBPF probes need it" >&2; exit 4; }

# A free loopback port for the broker.
port=""
for p in $(seq 14222 14322); do
	if ! ss -Htln "sport = :$p" | grep -q .; then port=$p; break; fi
done
[ -n "$port" ] || { echo "demo: no free port in 14222-14322" >&2; exit 1; }

rm -rf "$out" && mkdir -p "$out"
# Under sudo brokertrace writes as the user who ran it (README, Security):
# the directory is theirs, and so is what this script writes into it.
owner=""
[ -n "${SUDO_UID:-}" ] && [ "$SUDO_UID" != 0 ] && owner="$SUDO_UID:${SUDO_GID:-$SUDO_UID}"
[ -z "$owner" ] || chown "$owner" "$out"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap 'cleanup; [ -z "$owner" ] || chown -R "$owner" "$out"' EXIT

echo "== starting nats-server on 127.0.0.1:$port"
nats-server -a 127.0.0.1 -p "$port" >"$out/nats-server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do ss -Htln "sport = :$port" | grep -q . && break; sleep 0.1; done
ss -Htln "sport = :$port" | grep -q . || { echo "demo: nats-server did not start; see $out/nats-server.log" >&2; exit 1; }

echo "== sudo brokertrace record --port $port --out $out"
"$bt" record --port "$port" --out "$out" >"$out/record.txt" 2>"$out/record.log" &
rec=$!
pids+=($rec)
for _ in $(seq 300); do grep -q '^brokertrace: attached' "$out/record.log" && break; sleep 0.1; done
grep -q '^brokertrace: attached' "$out/record.log" || { cat "$out/record.log" >&2; echo "demo: brokertrace did not attach" >&2; exit 1; }
grep -E '^brokertrace: (attached|note:)' "$out/record.log"

echo "== brokertrace load: $count messages at $rate msg/s through the broker"
"$bt" load --url "nats://127.0.0.1:$port" --rate "$rate" --count "$count" --size 256 --out "$out"

echo "== stopping the recording (Ctrl-C)"
kill -INT "$rec"
wait "$rec"
echo
tail -n 3 "$out/record.log"
echo
cat "$out/record.txt"
echo
echo "== first rows of $out/messages.csv"
head -n 4 "$out/messages.csv"
rows=$(($(wc -l <"$out/messages.csv") - 1))
if [ "$rows" -ne "$count" ]; then
	echo "demo: messages.csv has $rows rows, expected $count" >&2
	exit 1
fi
echo
echo "== brokertrace report $out"
"$bt" report "$out" | head -n 40
echo
echo "demo: OK: $rows of $count messages traced through nats-server; files and $out/report.html in $out"
