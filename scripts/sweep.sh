#!/usr/bin/env bash
# The ICPE'14 Fig. 4/5 experiment on a broker of this machine: nats-server
# started by `brokertrace run` in a cgroup of its own, pinned to one CPU,
# driven by `brokertrace load` at rising rates. Prints, per rate, context
# switches per message by both definitions and broker CPU per message, and
# leaves one recording per rate plus a parametrised report.
#
#   sudo scripts/sweep.sh [OUT] [RATES…]      (default: sweep-out 500 1000 2000 4000 8000)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bt="$top/bin/brokertrace"
out="${1:-$top/sweep-out}"
shift || true
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(500 1000 2000 4000 8000)
[ "$(id -u)" = 0 ] || { echo "sweep: run as root" >&2; exit 4; }
[ -x "$bt" ] || { echo "sweep: build first (make build)" >&2; exit 1; }
cpu=$(($(nproc) - 1))
rm -rf "$out" && mkdir -p "$out"

printf '%8s %10s %12s %12s %14s %12s\n' rate msgs sw/msg_thr sw/msg_cpu cpu_us/msg p50_us
for rate in "${rates[@]}"; do
	port=$((15222 + RANDOM % 1000))
	dir="$out/rate-$rate"
	"$bt" run --cpus "$cpu" --out "$dir" --quiet --json -- nats-server -a 127.0.0.1 -p "$port" \
		>"$dir.meta.json" 2>"$dir.log" &
	run=$!
	for _ in $(seq 300); do grep -q '^brokertrace: attached' "$dir.log" 2>/dev/null && break; sleep 0.1; done
	count=$((rate * 4))
	"$bt" load --url "nats://127.0.0.1:$port" --rate "$rate" --count "$count" --warmup 1s --out "$dir" >/dev/null
	kill -INT "$run"
	wait "$run" || true
	python3 - "$dir" "$rate" <<'PY'
# Only windows in which messages entered count, so idle time before and
# after the load does not inflate the per-message figures.
import csv, sys
d, rate = sys.argv[1], sys.argv[2]
sched = [r for r in csv.DictReader(open(d + "/sched.csv")) if int(r["msgs_in"]) > 0]
msgs = sum(int(r["msgs_in"]) for r in sched)
thr = sum(int(r["switches_target"]) for r in sched)
cpus = sum(int(r["switches_cpus"]) for r in sched)
cpu = [r for r in csv.DictReader(open(d + "/cpu.csv")) if int(r["msgs_in"]) > 0]
busy = sum(float(r["broker_proc_util"] or 0) * (int(r["t_end_ns"]) - int(r["t_start_ns"])) for r in cpu)
cmsgs = sum(int(r["msgs_in"]) for r in cpu)
lat = sorted(int(r["latency_ns"]) for r in csv.DictReader(open(d + "/messages.csv")))
p50 = lat[(len(lat) - 1) // 2] / 1e3 if lat else float("nan")
print("%8s %10d %12.2f %12.2f %14.1f %12.1f" % (rate, msgs, thr / max(msgs, 1), cpus / max(msgs, 1), busy / max(cmsgs, 1) / 1e3, p50))
PY
done
"$bt" report --out "$out" "$out"/rate-*/ >"$out/report.txt"
echo "sweep: recordings in $out/rate-*, parametrised report in $out/report.html"
