#!/bin/sh
# kernel-run.sh OUT PORT: what the kernel matrix (scripts/kernels.sh) runs on
# each kernel, in a guest's initramfs (busybox sh) or on the host in a
# private network and mount namespace. It starts nats-server, records it
# with every default source while `brokertrace load` sends COUNT marked
# messages, and keeps, beside the recording, the truths the checker
# (internal/kernels) compares it with, read before and after the recording
# from counters brokertrace does not read: the loopback device's packets,
# TCP's segments, and the broker threads' switch counters. Then it runs the
# socket probe's tests (the kernel scanner against the Go reference) if
# their binary is on PATH. Needs brokertrace, nats-server (and
# sockio.test) on PATH.
set -u
out=$1
port=$2
count=${COUNT:-5000}
rate=${RATE:-1000}
mkdir -p "$out/rec" "$out/truth"
echo "kernel $(uname -r) $(uname -m)" >"$out/kernel"
cat /proc/version >>"$out/kernel"
# What is mounted before brokertrace runs: tracefs and debugfs must not be
# (brokertrace mounts what it needs and says so).
grep -E ' (tracefs|debugfs) ' /proc/mounts >"$out/truth/mounts.before" || true

nats-server -a 127.0.0.1 -p "$port" >"$out/nats.log" 2>&1 &
nats=$!
hexport=$(printf '%04X' "$port")
i=0
until grep -q ":$hexport 00000000:0000 0A" /proc/net/tcp; do
	i=$((i + 1))
	[ "$i" -gt 300 ] && { echo "nats-server did not listen" >"$out/error"; exit 1; }
	sleep 0.1
done

# snap NAME: the counters the checker compares the recording with.
snap() {
	# /proc/net/dev is the namespace's own (sysfs shows its mounter's).
	awk -F'[: ]+' '$2 == "lo" { print $4 }' /proc/net/dev >"$out/truth/$1.lo_rx_packets"
	cat /proc/net/snmp >"$out/truth/$1.snmp"
	for t in /proc/$nats/task/*; do
		printf '%s %s %s\n' "${t##*/}" \
			"$(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status")" \
			"$(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "$t/status")"
	done >"$out/truth/$1.threads"
}

# Outer snapshots bracket the recording from outside (taken before it
# attaches and after it ends), inner ones from inside (after it attached,
# before it is stopped): a count of the recording lies between the two.
snap outer-before
brokertrace record --port "$port" --out "$out/rec" >"$out/record.txt" 2>"$out/record.log" &
rec=$!
i=0
until grep -q '^brokertrace: attached' "$out/record.log"; do
	if ! kill -0 "$rec" 2>/dev/null; then
		wait "$rec"
		echo "$?" >"$out/record.rc"
		echo "brokertrace record exited before it attached" >"$out/error"
		kill "$nats"
		exit 1
	fi
	i=$((i + 1))
	[ "$i" -gt 3000 ] && { echo "brokertrace did not attach in 300 s" >"$out/error"; exit 1; }
	sleep 0.1
done
snap inner-before
brokertrace load --url "nats://127.0.0.1:$port" --rate "$rate" --count "$count" --size 256 --out "$out/rec" >"$out/load.txt" 2>&1
echo "$?" >"$out/load.rc"
snap inner-after
kill -INT "$rec"
wait "$rec"
echo "$?" >"$out/record.rc"
snap outer-after
kill "$nats"
wait "$nats" 2>/dev/null
grep -E ' (tracefs|debugfs) ' /proc/mounts >"$out/truth/mounts.after" || true

# The socket probe's tests on this kernel: every scan form against the Go
# reference, the losses it counts, the bounded walk where there is no
# bpf_loop.
if command -v sockio.test >/dev/null; then
	# -test.short: fewer seeds of the same tests (the host's make test
	# runs them all; under TCG each costs seconds).
	(cd /tmp && sockio.test -test.v -test.short -test.count=1 -test.timeout 20m \
		-test.run "${SOCKIO_TESTS:-.}") >"$out/sockio.test.log" 2>&1
	echo "$?" >"$out/sockio.test.rc"
fi
exit 0
