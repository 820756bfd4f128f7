#!/usr/bin/env bash
# The ICPE'14 §3 experiment on this machine with `brokertrace sweep`: the
# broker started once in a cgroup of its own, pinned to the last CPU, the
# load on CPU 0, a ladder of rates regular and bursty; the sweep stops
# climbing past saturation. Each sweep leaves OUT/BROKER/sweep.json, one
# directory per step and OUT/BROKER/report.html.
#
#   sudo scripts/sweep.sh [OUT] [nats|activemq|both]      (default: sweep-out both)
#
# Rerunning resumes an interrupted sweep. SWEEP_FLAGS are added to each sweep.
# STEP, FROM, TO, STEPS, PATTERN override the
# defaults (20s steps; 1000..128000 msg/s and 8 rates for nats-server,
# 1000..24000 msg/s and 10 rates for ActiveMQ; regular and bursty).
# ActiveMQ's GC log (the paper's source of the GC threshold) is
# OUT/activemq-base/gc.log: `brokertrace calibrate --gc-log` reads it.
set -euo pipefail
# shellcheck disable=SC2086 # SWEEP_FLAGS is a list of flags
top=$(cd "$(dirname "$0")/.." && pwd)
bt="$top/bin/brokertrace"
out="${1:-$top/sweep-out}"
which="${2:-both}"
[ "$(id -u)" = 0 ] || { echo "sweep: run as root" >&2; exit 4; }
[ -x "$bt" ] || { echo "sweep: build first (make build)" >&2; exit 1; }
cpu=$(($(nproc) - 1))
step=${STEP:-20s}
mkdir -p "$out"

if [ "$which" = nats ] || [ "$which" = both ]; then
	"$bt" sweep --url nats://127.0.0.1:14222 --cpus "$cpu" --load-cpus 0 \
		--from "${FROM:-1000}" --to "${TO:-128000}" --steps "${STEPS:-8}" --pattern "${PATTERN:-both}" --step "$step" \
		${SWEEP_FLAGS:-} --out "$out/nats" -- nats-server -a 127.0.0.1 -p 14222
fi

if [ "$which" = activemq ] || [ "$which" = both ]; then
	# ActiveMQ's command and configuration: scripts/activemq.sh. Past
	# saturation it holds messages for seconds: record keeps their ids for
	# a minute (--id-ttl) so that they still get a latency.
	base="$out/activemq-base"
	mapfile -t java < <("$top/scripts/activemq.sh" "$base")
	"$bt" sweep --url 'stomp://admin:admin@127.0.0.1:61613' --cpus "$cpu" --load-cpus 0 \
		--from "${FROM:-1000}" --to "${TO:-24000}" --steps "${STEPS:-10}" --pattern "${PATTERN:-both}" --step "$step" --warmup 5s \
		--record-flag=--id-ttl=60s --grace 30s ${SWEEP_FLAGS:-} --out "$out/activemq" -- "${java[@]}"
fi
echo "sweep: reports in $out/*/report.html"
