#!/usr/bin/env bash
# make cluster-demo: a 3-node NATS cluster on this host, each server in a
# network namespace of its own joined by veth pairs (full mesh), each
# recorded by its own brokertrace; a load publishes on node 1 and
# subscribes on nodes 2 and 3; brokertrace cluster joins the recordings
# into each message's path. Leaves everything in cluster-demo-out/ and
# removes the namespaces.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bt="$top/bin/brokertrace"
out="${CLUSTER_DEMO_OUT:-$top/cluster-demo-out}"
rate="${CLUSTER_DEMO_RATE:-20000}"
secs="${CLUSTER_DEMO_SECONDS:-5}"

[ "$(id -u)" = 0 ] || { echo "cluster-demo: run as root (sudo make cluster-demo): eBPF probes and namespaces need it" >&2; exit 4; }

id="btd$$"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for i in 1 2 3; do
		ip netns del "$id-n$i" 2>/dev/null || true
		ip link del "$id-c$i" 2>/dev/null || true
	done
}
trap cleanup EXIT
rm -rf "$out" && mkdir -p "$out"

# Client links: 10.214.(100+i).1 here, .2 in node i. Mesh links between
# nodes i < j: 10.214.(10i+j).1 in i, .2 in j.
for i in 1 2 3; do
	ip netns add "$id-n$i"
	ip -n "$id-n$i" link set lo up
	ip link add "$id-c$i" type veth peer name eth0 netns "$id-n$i"
	ip addr add "10.214.$((100 + i)).1/24" dev "$id-c$i"
	ip link set "$id-c$i" up
	ip -n "$id-n$i" addr add "10.214.$((100 + i)).2/24" dev eth0
	ip -n "$id-n$i" link set eth0 up
done
for pair in "1 2" "1 3" "2 3"; do
	set -- $pair
	ip -n "$id-n$1" link add "r$2" type veth peer name "r$1" netns "$id-n$2"
	ip -n "$id-n$1" addr add "10.214.$((10 * $1 + $2)).1/24" dev "r$2"
	ip -n "$id-n$2" addr add "10.214.$((10 * $1 + $2)).2/24" dev "r$1"
	ip -n "$id-n$1" link set "r$2" up
	ip -n "$id-n$2" link set "r$1" up
done

routes=("nats://10.214.12.2:6222,nats://10.214.13.2:6222" "nats://10.214.23.2:6222" "")
echo "== 3 nats-servers, cluster bt-demo, in namespaces $id-n1..3"
for i in 1 2 3; do
	args=(-n "node$i" -a 0.0.0.0 -p 4222 -m 8222 --cluster_name bt-demo --cluster nats://0.0.0.0:6222)
	[ -z "${routes[$((i - 1))]}" ] || args+=(--routes "${routes[$((i - 1))]}")
	ip netns exec "$id-n$i" nats-server "${args[@]}" >"$out/node$i.log" 2>&1 &
	pids+=($!)
done
for i in 1 2 3; do
	for _ in $(seq 150); do
		n=$(ip netns exec "$id-n$i" ss -Htn state established '( sport = :6222 or dport = :6222 )' | wc -l)
		[ "${n:-0}" -ge 2 ] && break
		sleep 0.1
	done
	[ "${n:-0}" -ge 2 ] || { echo "cluster-demo: node$i has ${n:-0} of 2 routes; see $out/node$i.log" >&2; exit 1; }
done

for i in 1 2 3; do
	echo "== sudo brokertrace record --pid ${pids[$((i - 1))]} --pcap $out/node$i.pcapng --out $out/node$i"
	"$bt" record --pid "${pids[$((i - 1))]}" --pcap "$out/node$i.pcapng" --out "$out/node$i" >"$out/record$i.txt" 2>"$out/record$i.log" &
	pids+=($!)
done
for i in 1 2 3; do
	for _ in $(seq 300); do grep -q '^brokertrace: attached' "$out/record$i.log" && break; sleep 0.1; done
	grep -q '^brokertrace: attached' "$out/record$i.log" || { cat "$out/record$i.log" >&2; exit 1; }
done

echo "== brokertrace load --url nats://10.214.101.2:4222 --sub-url nats://10.214.102.2:4222 --sub-url nats://10.214.103.2:4222 --rate $rate --duration ${secs}s"
"$bt" load --url nats://10.214.101.2:4222 --sub-url nats://10.214.102.2:4222 --sub-url nats://10.214.103.2:4222 \
	--rate "$rate" --duration "${secs}s" --size 256 --out "$out/load"

for i in 1 2 3; do kill -INT "${pids[$((i + 2))]}"; done
for i in 1 2 3; do wait "${pids[$((i + 2))]}"; done
echo
echo "== brokertrace cluster $out/node1 $out/node2 $out/node3 --out $out/cluster"
"$bt" cluster "$out/node1" "$out/node2" "$out/node3" --out "$out/cluster"
