#!/usr/bin/env bash
# The ICPE'14 loop on this machine, end to end: platform constants, an
# ActiveMQ sweep (broker pinned to the last CPU, STOMP load on CPU 0, regular
# arrivals), the §4.4 calibration (with the platform's quantum), the model
# files, and the prediction beside the measurement. Prints the
# predicted-vs-measured table the README shows (OUT/model-activemq.md) and
# the sweep's wall time (goal: 10 rates in under 5 minutes).
#
#   sudo scripts/model-bench.sh [OUT]     (default: brokertrace-model)
#
# FROM, TO, STEPS, STEP override the ladder (default 1000..24000 msg/s, 10
# rates, 20s steps); PLATFORM_FLAGS the platform run (e.g. --quick).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bt="$top/bin/brokertrace"
out="${1:-$top/brokertrace-model}"
[ "$(id -u)" = 0 ] || { echo "model-bench: run as root" >&2; exit 4; }
[ -x "$bt" ] || { echo "model-bench: build first (make build)" >&2; exit 1; }
mkdir -p "$out"

# shellcheck disable=SC2086
"$bt" platform ${PLATFORM_FLAGS:-} --out "$out/platform"

t0=$(date +%s)
PATTERN=regular FROM="${FROM:-1000}" TO="${TO:-24000}" STEPS="${STEPS:-10}" STEP="${STEP:-20s}" \
	"$top/scripts/sweep.sh" "$out" activemq
t1=$(date +%s)
echo "model-bench: the sweep took $((t1 - t0)) s (goal: under 300 s for 10 rates)"

# The GC threshold and pause from the JVM's GC log, as the paper read them;
# c per measured switch (the simulated model pays it per switch it makes);
# the utilisation plateau where it is within 10% of its highest (the
# broker's utilisation near the peak wanders by more than 5% between steps).
"$bt" calibrate --platform "$out/platform/platform.json" --gc-log "$out/activemq-base/gc.log" \
	--penalties-measured --plateau 0.9 "$out/activemq"
"$bt" export --out "$out/activemq" "$out/activemq/calibration.json"
"$bt" predict --pattern regular --out "$out/activemq" "$out/activemq/calibration.json"

python3 - "$out/activemq/prediction.json" "$((t1 - t0))" >"$out/model-activemq.md" <<'PY'
# The README's table: per rate, measured and predicted throughput, broker
# CPU utilisation and median latency, with the goals' verdicts.
import json, sys
p = json.load(open(sys.argv[1]))
us = lambda ns: "%.0f µs" % (ns / 1e3) if ns < 1e7 else "%.1f ms" % (ns / 1e6)
print("| asked msg/s | measured msg/s | predicted msg/s | broker CPU measured | predicted | error | p50 measured | predicted | ratio |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in p["rows"]:
    m, q, e = r.get("measured"), r["predicted"], r.get("errors")
    if not m or not e:
        continue
    print("| %.0f | %.0f | %.0f | %.1f%% | %.1f%% | %+.1f pp%s | %s | %s | %.2f× |" % (
        r["rate"], m["throughput"], q["throughput"], 100 * m["broker_util"], 100 * q["broker_util"],
        e["broker_util_pp"], "" if e["util_checked"] else " (saturated)",
        us(m["latency"]["p50_ns"]), us(q["latency"]["p50_ns"]), e["median_ratio"]))
s = p["saturation"]
print()
print("Saturation: predicted %.0f msg/s, measured %.0f msg/s (%+.1f%%). The sweep took %s s." % (
    s["predicted"], s["measured"], s["error_pct"], sys.argv[2]))
for g in p["goals"]:
    print("- %s: %s — %s" % (g["name"], "met" if g["met"] else "missed", g["detail"]))
PY
cat "$out/model-activemq.md"
