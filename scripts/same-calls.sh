#!/bin/bash
# The in-kernel cost of matching by frame against matching by marker on the
# same calls, on five real brokers (README, "On the same calls"): for each,
# `brokertrace overhead --configs T+I+C+both`, whose two socket probes
# (--match both) run by every call of the broker one after the other, so
# that the host's noise moves both. Prints the README's table.
#
#   sudo scripts/same-calls.sh [OUT] [BROKER...]
#       (default: brokertrace-same-calls activemq activemq-json nats mosquitto redis rabbitmq)
#
# RUNS (default 4) runs per broker, each with a fresh broker pinned to CPU 0,
# the load on CPU 1. Each broker's overhead.json and table are in OUT/NAME.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bt=$top/bin/brokertrace
out=${1:-brokertrace-same-calls}
shift || true
brokers=("$@")
[ ${#brokers[@]} -gt 0 ] || brokers=(activemq activemq-json nats mosquitto redis rabbitmq)
[ "$(id -u)" = 0 ] || { echo "same-calls: run as root: the probes load eBPF programs" >&2; exit 4; }
[ -x "$bt" ] || { echo "same-calls: no $bt: run make first" >&2; exit 1; }
mkdir -p -m 0700 "$out"

# args NAME: the overhead flags for the broker NAME, one per line.
args() {
	case $1 in
	activemq) printf '%s\n' --broker activemq --count 100000 ;;
	activemq-json) printf '%s\n' --broker activemq --count 100000 --payload json ;;
	nats) printf '%s\n' --broker nats ;;
	mosquitto) printf '%s\n' --count 100000 --url mqtt://127.0.0.1:18830/bt -- mosquitto -p 18830 ;;
	redis) printf '%s\n' --count 100000 --url redis://127.0.0.1:6390/bt -- redis-server --port 6390 --save '' --appendonly no ;;
	rabbitmq)
		printf '%s\n' --count 50000 --url amqp://guest:guest@127.0.0.1:15672/ --
		"$top/scripts/rabbitmq.sh" "$out/rabbitmq-base"
		;;
	*)
		echo "same-calls: broker $1: give activemq, activemq-json, nats, mosquitto, redis or rabbitmq" >&2
		exit 2
		;;
	esac
}

rows=()
for b in "${brokers[@]}"; do
	a=$(args "$b")
	mapfile -t flags <<<"$a"
	[ "$b" = rabbitmq ] && { epmd -port 14369 -address 127.0.0.1 -daemon || true; }
	echo "same-calls: $b ($(date +%T))" >&2
	rm -rf "${out:?}/$b"
	"$bt" overhead --configs T+I+C+both --runs "${RUNS:-4}" --prog-stats --markdown --out "$out/$b" "${flags[@]}" >"$out/$b.md"
	line=$(grep 'on the same calls' "$out/$b.md")
	# "... the frame probe F ns per message against the marker probe's M (R×); run by run A×, B×."
	f=$(sed -E 's/.*frame probe ([0-9]+) ns.*/\1/' <<<"$line")
	m=$(sed -E "s/.*marker probe's ([0-9]+) .*/\1/" <<<"$line")
	r=$(sed -E 's/.*\(([0-9.]+×)\);.*/\1/' <<<"$line")
	each=$(sed -E 's/.*run by run (.*)\./\1/' <<<"$line")
	rows+=("| $b | $f / $m | **$r** | $each |")
done
echo "| broker | frame / marker probe, ns per message | ratio | run by run |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
