#!/bin/bash
# Soak: brokertrace records nats-server under a steady marked load and its
# resident memory is sampled; the goal is RSS <= 150 MB and flat over an
# hour at 100 000 msg/s. make bench runs a short soak (SOAK_SECONDS=120);
# the goal's run is SOAK_SECONDS=3600.
#
#   SOAK_SECONDS  how long the load runs (default 120)
#   SOAK_RATE     messages per second (default 100000)
#   SOAK_SIZE     message size in bytes (default 128)
#   SOAK_MAX_MB   RSS limit checked at the end (default 150)
#   SOAK_OUT      directory for soak.csv and the summary (default brokertrace-soak)
#   SOAK_BIN      the brokertrace binary (default bin/brokertrace)
#   SOAK_FLAGS    extra flags for brokertrace record (default --discard: an
#                 hour at 100 000 msg/s would write ~50 GB of messages.csv)
#
# The load runs as consecutive one-minute load processes (one process for
# an hour would itself hold every message's times); the recording spans
# them all. Exits 1 when the RSS limit is exceeded or the RSS of the last
# tenth of the run is more than 10% above that of the second tenth.
set -euo pipefail
cd "$(dirname "$0")/.."
BT=${SOAK_BIN:-bin/brokertrace}
SECONDS_TOTAL=${SOAK_SECONDS:-120}
RATE=${SOAK_RATE:-100000}
SIZE=${SOAK_SIZE:-128}
MAX_MB=${SOAK_MAX_MB:-150}
OUT=${SOAK_OUT:-brokertrace-soak}
FLAGS=${SOAK_FLAGS:---discard}
CHUNK=60
mkdir -p "$OUT"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

nats-server -a 127.0.0.1 -p "$PORT" >"$OUT/nats.log" 2>&1 &
NATS=$!
REC=
cleanup() {
	[ -n "$REC" ] && kill -INT "$REC" 2>/dev/null && wait "$REC" || true
	kill "$NATS" 2>/dev/null && wait "$NATS" 2>/dev/null || true
}
trap cleanup EXIT
sleep 0.5
# shellcheck disable=SC2086
$BT record --port "$PORT" --quiet $FLAGS >"$OUT/summary.txt" 2>"$OUT/record.log" &
REC=$!
for _ in $(seq 300); do grep -q "brokertrace: attached" "$OUT/record.log" 2>/dev/null && break; sleep 0.1; done

# rss_kb splits into anon_kb (the Go heap and stacks), file_kb (the
# binary, the ring buffers, each mapped twice, and the capture ring) and
# shmem_kb.
echo "t_s,rss_kb,cpu_ticks,anon_kb,file_kb,shmem_kb" >"$OUT/soak.csv"
(
	start=$(date +%s)
	while kill -0 "$REC" 2>/dev/null; do
		mem=$(awk '/^(VmRSS|RssAnon|RssFile|RssShmem):/ {m[$1] = $2} END {if ("VmRSS:" in m) print m["VmRSS:"] "," m["RssAnon:"] "," m["RssFile:"] "," m["RssShmem:"]}' "/proc/$REC/status" 2>/dev/null || true)
		cpu=$(awk '{print $14 + $15}' "/proc/$REC/stat" 2>/dev/null || true)
		[ -n "$mem" ] && echo "$(($(date +%s) - start)),${mem%%,*},$cpu,${mem#*,}" >>"$OUT/soak.csv"
		sleep 5
	done
) &
SAMPLER=$!

left=$SECONDS_TOTAL
while [ "$left" -gt 0 ]; do
	d=$((left < CHUNK ? left : CHUNK))
	$BT load --url "nats://127.0.0.1:$PORT" --rate "$RATE" --size "$SIZE" --duration "${d}s" \
		--drain 1s --out "$OUT/load" >/dev/null 2>&1 || true
	left=$((left - d))
done
kill -INT "$REC"
wait "$REC" || true
REC=
wait "$SAMPLER" 2>/dev/null || true

python3 - "$OUT/soak.csv" "$MAX_MB" "$SECONDS_TOTAL" "$RATE" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1]))]
limit, secs, rate = float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rss = [int(r["rss_kb"]) / 1024 for r in rows]
n = len(rss)
tenth = max(n // 10, 1)
early = max(rss[tenth:2 * tenth] or rss[:1])
late = max(rss[-tenth:])
peak = max(rss)
ok = peak <= limit and late <= early * 1.10
print(f"soak: {secs} s at {rate} msg/s: brokertrace RSS peak {peak:.0f} MB (limit {limit:.0f}), "
      f"second tenth {early:.0f} MB, last tenth {late:.0f} MB ({(late / early - 1) * 100:+.1f}%): "
      + ("ok" if ok else "FAILED"))
print("soak: RSS by tenth of the run (MB): " + " ".join(f"{max(rss[i * tenth:(i + 1) * tenth] or rss[-1:]):.0f}" for i in range(10)))
top = rows[rss.index(peak)]
if top.get("anon_kb"):
    print("soak: at the peak, MB: anonymous (Go heap, stacks) {:.0f}, file-backed (binary, ring buffers, capture ring) {:.0f}, shmem {:.0f}".format(
        *(int(top[k]) / 1024 for k in ("anon_kb", "file_kb", "shmem_kb"))))
sys.exit(0 if ok else 1)
PY
