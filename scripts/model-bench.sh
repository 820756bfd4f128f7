#!/usr/bin/env bash
# The model loop on three brokers, end to end, each pinned to CPU 0 with
# the load on CPU 1: a sweep that finds the broker's knee itself (regular
# and bursty arrivals at each rate), the calibration on the regular steps,
# the model files, and the prediction beside the measurement. The bursty
# steps were not used to calibrate, and a second sweep of the same broker
# with another ladder (fractions of the knee the first found), run later,
# is predicted with --against: the model is judged on what it was not
# fitted to. Prints, per broker, the predicted-vs-measured tables the
# README shows (OUT/model-BROKER.md) and the loop's wall time (goal: under
# 5 minutes per broker).
#
#   sudo scripts/model-bench.sh [OUT] [BROKER...]   (default: brokertrace-model nats activemq rabbitmq)
#
# STEP (default 6s) is each step's length; FROM the knee search's first
# rate; ANALYSE=1 recalibrates and predicts from the sweeps OUT holds.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bt="$top/bin/brokertrace"
out="${1:-$top/brokertrace-model}"
shift || true
brokers=("$@")
[ ${#brokers[@]} -gt 0 ] || brokers=(nats activemq rabbitmq)
[ "$(id -u)" = 0 ] || { echo "model-bench: run as root" >&2; exit 4; }
[ -x "$bt" ] || { echo "model-bench: build first (make build)" >&2; exit 1; }
mkdir -p "$out"
step=${STEP:-6s}
common=(--cpus 0 --load-cpus 1 --pattern both --step "$step" --warmup 2s)

# broker_cmd BROKER BASE: the URL, then the command that runs the broker in
# the foreground, one word per line.
broker_cmd() {
	local base=$2
	mkdir -p "$base"
	case $1 in
	nats)
		printf '%s\n' nats://127.0.0.1:14222 nats-server -a 127.0.0.1 -p 14222
		;;
	activemq)
		echo 'stomp://admin:admin@127.0.0.1:61613'
		"$top/scripts/activemq.sh" "$base"
		;;
	rabbitmq)
		# A node of its own (its epmd started below).
		echo amqp://guest:guest@127.0.0.1:15672/
		"$top/scripts/rabbitmq.sh" "$base"
		;;
	*)
		echo "model-bench: broker $1: give nats, activemq or rabbitmq" >&2
		exit 2
		;;
	esac
}

# sweep BROKER DIR LADDER...: one sweep of the broker, started for it.
sweep() {
	local b=$1 dir=$2
	shift 2
	mapfile -t cmd < <(broker_cmd "$b" "$out/$b-base")
	local url=${cmd[0]} extra=()
	[ "$b" = activemq ] && extra=(--record-flag=--id-ttl=60s --grace 30s)
	"$bt" sweep --url "$url" "${common[@]}" "${extra[@]}" "$@" --out "$dir" -- "${cmd[@]:1}"
}

# knee DIR: the highest rate a regular step of the sweep achieved below
# saturation.
knee() {
	python3 -c '
import json, sys
s = json.load(open(sys.argv[1] + "/sweep.json"))
ok = [x["rate_achieved"] for x in s["steps"] if x.get("status") == "done" and x["pattern"] == "regular" and not x["saturated"]]
print("%.0f" % max(ok))' "$1"
}

table() {
	python3 - "$@" <<'PY'
# Per rate and pattern: measured and predicted throughput, broker CPU and
# latency, with the goals' verdicts; which steps calibrated the model.
import json, sys
p = json.load(open(sys.argv[1]))
us = lambda ns: "%.0f µs" % (ns / 1e3) if ns < 1e7 else "%.1f ms" % (ns / 1e6)
print("| pattern | asked msg/s | arrivals' CV measured | model | measured msg/s | predicted | broker CPU measured | predicted | error | of it: costs / simulation | wake-ups per msg measured / model | p50 measured | predicted | p99 measured | predicted |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
cv = lambda v: "%.2f" % v["arrival_cv"] if v.get("arrival_cv") is not None else "–"
for r in p["rows"]:
    m, q, e = r.get("measured"), r["predicted"], r.get("errors")
    if not m or not e:
        continue
    note = "" if e["util_checked"] else " (saturated)"
    # Judged without the JIT compiler threads' CPU, shown beside it.
    jit = m.get("jit_util", 0)
    util = "%.1f%%" % (100 * (m["broker_util"] - jit)) + (" +%.1f%% JIT" % (100 * jit) if jit >= 0.0005 else "")
    # The error split at the fitted cost law (prediction.json
    # broker_util_parts): the broker's costs moving, or the simulation's
    # wake-ups.
    parts = e.get("broker_util_parts")
    split = "%+.1f / %+.1f" % (parts["law_pp"], parts["simulation_pp"]) if parts else "–"
    wakes = "%.2f / %.2f" % (m.get("wakeups_per_msg", 0), q.get("wakeups_per_msg", 0))
    print("| %s | %.0f | %s | %s | %.0f | %.0f | %s | %.1f%% | %+.1f pp%s | %s | %s | %s | %s | %s | %s |" % (
        r["pattern"], r["rate"], cv(m), cv(q), m["throughput"], q["throughput"], util, 100 * q["broker_util"],
        e["broker_util_pp"], note, split, wakes, us(m["latency"]["p50_ns"]), us(q["latency"]["p50_ns"]),
        us(m["latency"]["p99_ns"]), us(q["latency"]["p99_ns"])))
print()
for g in p["goals"]:
    print("- %s: %s — %s" % (g["name"], "met" if g["met"] else "missed", g["detail"]))
r = p.get("repeatability")
if r and r["compared"]:
    line = "- the measurement itself (this sweep against the calibrating one, same rate and pattern): utilisation apart by up to %+.1f pp over %d rates (%s %.0f msg/s: %.1f%% here, %.1f%% there, interpolated; the model's error there %+.1f pp)" % (
        r["worst_pp"], r["compared"], r["pattern"], r["rate"], 100 * r["measured"], 100 * r["calibrating"], r.get("model_pp", 0))
    if r["peak_compared"]:
        line += "; saturation %+.1f%% from the calibrating sweep's" % r["peak_pct"]
    print(line)
PY
}

# goals WHAT PREDICTION: the goals' verdicts of a prediction, one line.
goals() {
	python3 - "$@" <<'PY'
import json, sys
p = json.load(open(sys.argv[2]))
print("- %s: %s" % (sys.argv[1], "; ".join("%s %s (%s)" % (g["name"], "met" if g["met"] else "missed", g["detail"].split(":")[0]) for g in p["goals"])))
PY
}

# measure BROKER: the first sweep to the knee and the model from it (the
# loop the goal times), then the second sweep at fractions of the knee.
measure() {
	local b=$1 d="$out/$1"
	rm -rf "$d" "$d-2" "$d-cv" "$d-replay" "$d-cv-replay"
	[ "$b" = rabbitmq ] && { epmd -port 14369 -address 127.0.0.1 -daemon || true; }
	local t0
	t0=$(date +%s)
	sweep "$b" "$d" --from "${FROM:-1000}"
	# The JVM starts its GC log afresh: keep the first sweep's beside it.
	[ "$b" = activemq ] && cp "$out/$b-base/gc.log" "$d/gc.log"
	analyse_first "$b"
	echo $(($(date +%s) - t0)) >"$d/loop-seconds"
	local k rates
	k=$(knee "$d")
	rates=$(python3 -c "import sys; k=float(sys.argv[1]); print(','.join('%.0f' % (f*k) for f in (0.15, 0.35, 0.55, 0.75, 0.9, 1.1)))" "$k")
	sweep "$b" "$d-2" --rates "$rates" --beyond
}

# analyse_first BROKER: calibrate on the regular steps, the model files,
# the prediction beside the first sweep. No --allow-lossy: a step that lost
# what the calibration uses is refused (the socket-queue source's skipped
# runs are not that: calibrate warns and counts them).
analyse_first() {
	local b=$1 d="$out/$1" cal=()
	[ "$b" = activemq ] && cal+=(--gc-log "$d/gc.log")
	"$bt" calibrate "${cal[@]}" "$d"
	"$bt" export --out "$d" "$d/calibration.json"
	"$bt" predict --out "$d" "$d/calibration.json"
}

# report BROKER: the same model against the second sweep, and the tables.
report() {
	local b=$1 d="$out/$1"
	"$bt" predict --against "$d-2" --out "$d-cv" "$d/calibration.json"
	"$bt" predict --pattern measured --out "$d-replay" "$d/calibration.json" >/dev/null
	"$bt" predict --pattern measured --against "$d-2" --out "$d-cv-replay" "$d/calibration.json" >/dev/null
	{
		echo "### $b: calibrated on the regular steps of its first sweep (knee $(knee "$d") msg/s)"
		echo
		table "$d/prediction.json"
		echo
		echo "### $b: the same model against a second sweep ($(python3 -c 'import json,sys; print(",".join("%.0f" % s["rate_asked"] for s in json.load(open(sys.argv[1]))["steps"] if s["pattern"] == "regular"))' "$d-2/sweep.json") msg/s)"
		echo
		table "$d-cv/prediction.json"
		echo
		echo "With the arrivals the broker saw (its socket's t_arrive_ns) replayed, the same model (predict --pattern measured):"
		echo
		goals "first sweep" "$d-replay/prediction.json"
		goals "second sweep" "$d-cv-replay/prediction.json"
		echo
		"$bt" export --out "$d" "$d/calibration.json" | sed -n 2p | sed 's/^/model.jmva: /'
		echo
		echo "The loop (sweep to the knee, calibrate, export, predict) took $(cat "$d/loop-seconds") s (goal: under 300 s)."
	} >"$out/model-$b.md"
	cat "$out/model-$b.md"
}

# ANALYSE=1 redoes only the calibration, model files and tables from the
# sweeps already in OUT.
for b in "${brokers[@]}"; do
	if [ "${ANALYSE:-}" = 1 ]; then
		analyse_first "$b"
	else
		measure "$b"
	fi
	report "$b"
done
