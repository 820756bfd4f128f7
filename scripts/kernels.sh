#!/usr/bin/env bash
# make kernels: the kernel matrix. Boots Debian's own kernels under qemu
# (TCG: no KVM needed) with an initramfs built from Debian packages
# (busybox-static, nats-server and its libc, for each architecture) holding
# bin/brokertrace and the socket probe's test binary, runs
# scripts/kernel-run.sh in each guest, brings the guest's files back over
# its console, and runs the same on the host kernel in a private network
# and mount namespace with tracefs and debugfs unmounted. Then the checker
# (go test -tags kernels ./internal/kernels) compares every recording with
# the truths the guest kept, and prints the README's "Where it was tested"
# table.
#
# Packages come through a private apt configuration in the cache directory
# (KERNELS_CACHE, default .cache/kernels): the host's apt sources and dpkg
# architectures are not touched. KERNELS=name,name runs some of the matrix.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${KERNELS_CACHE:-$top/.cache/kernels}
results=$cache/results
[ "$(id -u)" = 0 ] || { echo "kernels: run as root (sudo make kernels)" >&2; exit 4; }

# name  architecture  kernel package (newest match)  what it stands for
matrix=(
	"5.10-amd64 amd64 ^linux-image-5\.10\.0-[0-9]+-amd64$ Debian 11"
	"6.1-amd64 amd64 ^linux-image-6\.1\.0-[0-9]+-amd64$ Debian 12, Amazon Linux 2023's series"
	"6.12-amd64 amd64 ^linux-image-6\.12\.[0-9]+\+deb12-amd64$ Debian 12 updates, Debian 13"
	"6.1-arm64 arm64 ^linux-image-6\.1\.0-[0-9]+-arm64$ Debian 12 on arm64"
)
want=${KERNELS:-all}
picked() { [ "$want" = all ] || [[ ",$want," == *",$1,"* ]]; }

apt_opts=(-o "Dir::State=$cache/apt/state" -o "Dir::State::Lists=$cache/apt/lists"
	-o "Dir::State::status=$cache/apt/state/status" -o "Dir::Cache=$cache/apt/cache"
	-o "Dir::Etc::SourceList=$cache/apt/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
	-o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=/dev/null"
	-o "APT::Architectures::=amd64" -o "APT::Architectures::=arm64" -o "APT::Sandbox::User=root"
	-o "Debug::NoLocking=1" -q)

# apt_setup: Debian 11 and 12 with their security and update suites, for
# amd64 and arm64, in the cache directory.
apt_setup() {
	mkdir -p "$cache/apt/state" "$cache/apt/lists/partial" "$cache/apt/cache/archives/partial" "$cache/debs"
	touch "$cache/apt/state/status"
	local k=/usr/share/keyrings/debian-archive-keyring.gpg
	cat >"$cache/apt/sources.list" <<EOF
deb [arch=amd64,arm64 signed-by=$k] http://deb.debian.org/debian bookworm main
deb [arch=amd64,arm64 signed-by=$k] http://deb.debian.org/debian bookworm-updates main
deb [arch=amd64,arm64 signed-by=$k] http://deb.debian.org/debian-security bookworm-security main
deb [arch=amd64,arm64 signed-by=$k] http://deb.debian.org/debian bullseye main
deb [arch=amd64,arm64 signed-by=$k] http://deb.debian.org/debian-security bullseye-security main
EOF
	apt-get "${apt_opts[@]}" update >"$cache/apt/update.log" 2>&1 ||
		{ cat "$cache/apt/update.log" >&2; echo "kernels: apt-get update failed" >&2; exit 1; }
}

# deb PACKAGE[:ARCH]: the package's .deb in the cache, downloaded once.
deb() {
	local name=${1%%:*} arch=amd64
	[[ $1 == *:* ]] && arch=${1##*:}
	local f
	f=$(ls "$cache/debs/${name}_"*"_$arch.deb" 2>/dev/null | sort -V | tail -n 1 || true)
	if [ -z "$f" ]; then
		(cd "$cache/debs" && apt-get "${apt_opts[@]}" download "$1" >/dev/null) ||
			{ echo "kernels: cannot download $1" >&2; exit 1; }
		f=$(ls "$cache/debs/${name}_"*"_$arch.deb" | sort -V | tail -n 1)
	fi
	echo "$f"
}

# kernel REGEX ARCH: the newest kernel image package matching REGEX.
kernel_pkg() {
	apt-cache "${apt_opts[@]}" pkgnames linux-image- | grep -E "$1" | sort -V | tail -n 1
}

# initramfs ARCH: the guest's root for the architecture, as a gzipped cpio.
initramfs() {
	local arch=$1 root="$cache/root-$1"
	local bt=$top/bin/brokertrace goarch=amd64
	if [ "$arch" = arm64 ]; then bt=$top/bin/brokertrace-arm64 goarch=arm64; fi
	rm -rf "$root" && mkdir -p "$root"/{bin,sbin,usr/bin,proc,sys,dev,tmp,out,run}
	for p in busybox-static libc6 nats-server; do
		dpkg-deb -x "$(deb "$p:$arch")" "$root"
	done
	rm -rf "$root/usr/share" "$root/usr/lib/"*/gconv "$root/usr/libexec"
	cp "$bt" "$root/usr/bin/brokertrace"
	GOARCH=$goarch CGO_ENABLED=0 go test -c -o "$root/usr/bin/sockio.test" ./probes/sockio
	cp "$top/scripts/kernel-run.sh" "$root/kernel-run.sh"
	cat >"$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/bin:/usr/sbin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs out /out
mount -t cgroup2 cgroup2 /sys/fs/cgroup
# No transparent huge pages: while khugepaged collapses a range of the
# test's memory its pages are briefly unmapped, the probe's read of them
# fails, and the call's bytes are counted as faulted. That is a counted
# loss the probe cannot avoid (it may not fault pages in), but it voids
# the scanner tests' exact counts: seen on 6.1 arm64 and 6.12 amd64,
# about one run in a few hundred.
echo never >/sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null
ip link set lo up
echo "BTK-KERNEL $(uname -r) $(uname -m)"
# No tracefs, no debugfs: brokertrace mounts what it needs, and says so.
sh /kernel-run.sh /out 4222
echo "BTK-BEGIN"
tar -C /out -cz . | base64
echo "BTK-END"
poweroff -f
EOF
	chmod +x "$root/init" "$root/kernel-run.sh"
	(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$cache/initramfs-$arch.gz"
}

# boot NAME ARCH VMLINUZ: runs the guest; its files land in results/NAME.
boot() {
	local name=$1 arch=$2 vmlinuz=$3 dir=$results/$1
	local qemu=(qemu-system-x86_64 -machine q35 -cpu max) console=ttyS0 limit=900
	if [ "$arch" = arm64 ]; then
		qemu=(qemu-system-aarch64 -machine virt -cpu max,pauth-impdef=on) console=ttyAMA0 limit=1800
	fi
	rm -rf "$dir" && mkdir -p "$dir/out"
	local start=$SECONDS
	# Single-threaded TCG: both vCPUs on one host thread. Multi-threaded
	# TCG breaks the kernels' live code patching (the static keys that
	# attaching a tracepoint program flips) across vCPUs: measured here,
	# Linux 6.12 died of an int3 oops in syscall exit, 5.10 spun in soft
	# lockups, and on arm64 attached programs missed every call of a test
	# (2 of 2 runs); with thread=single, none of that in 3 runs of each.
	timeout "$limit" "${qemu[@]}" -accel tcg,thread=single -smp 2 -m 2048 -nographic -no-reboot -monitor none -nic none \
		-kernel "$vmlinuz" -initrd "$cache/initramfs-$arch.gz" \
		-append "console=$console quiet loglevel=1 panic=-1" </dev/null >"$dir/console.log" 2>&1 || true
	echo "$((SECONDS - start))" >"$dir/seconds"
	tr -d '\r' <"$dir/console.log" | sed -n '/^BTK-BEGIN$/,/^BTK-END$/p' | sed '1d;$d' |
		base64 -d 2>/dev/null | tar -C "$dir/out" -xz 2>/dev/null ||
		echo "the guest's files did not come back (see console.log)" >"$dir/error"
	echo "kernels: $name: $(cat "$dir/out/kernel" 2>/dev/null | head -n 1 || echo 'no result') in $(cat "$dir/seconds") s"
}

# host: the same run on this machine's kernel, in a private network and
# mount namespace where tracefs and debugfs are unmounted.
host() {
	local dir=$results/host
	rm -rf "$dir" && mkdir -p "$dir/out"
	local tbin=$cache/host-bin
	mkdir -p "$tbin"
	cp "$top/bin/brokertrace" "$tbin/"
	CGO_ENABLED=0 go test -c -o "$tbin/sockio.test" ./probes/sockio
	local start=$SECONDS
	unshare --net --mount --propagation private sh -c '
		for m in /sys/kernel/debug/tracing /sys/kernel/tracing /sys/kernel/debug; do
			umount -l "$m" 2>/dev/null || true
		done
		ip link set lo up
		PATH="$1:$PATH" sh "$2" "$3" 4222
	' sh "$tbin" "$top/scripts/kernel-run.sh" "$dir/out" >"$dir/console.log" 2>&1 || true
	echo "$((SECONDS - start))" >"$dir/seconds"
	echo "kernels: host: $(head -n 1 "$dir/out/kernel") in $(cat "$dir/seconds") s"
}

cd "$top"
mkdir -p "$results"
apt_setup
pids=()
for entry in "${matrix[@]}"; do
	read -r name arch regex about <<<"$entry"
	picked "$name" || continue
	pkg=$(kernel_pkg "$regex")
	[ -n "$pkg" ] || {
		echo "kernels: $name: no package matches $regex in $cache/apt/sources.list (a suite moved to archive.debian.org?)" >&2
		exit 1
	}
	kdir=$cache/kernel-$name
	if [ ! -f "$kdir/.pkg" ] || [ "$(cat "$kdir/.pkg")" != "$pkg" ]; then
		rm -rf "$kdir" && mkdir -p "$kdir"
		dpkg-deb -x "$(deb "$pkg:$arch")" "$kdir"
		echo "$pkg" >"$kdir/.pkg"
	fi
	echo "$about" >"$kdir/.about"
done
for arch in amd64 arm64; do
	initramfs "$arch"
done
# Two lanes, one per host CPU (each guest is one host thread): arm64, the
# slowest under TCG, then the newest amd64 kernel; and the other amd64
# kernels, then the host. One after another they took 10 minutes; in two
# lanes the longer one takes about 6.
lane() {
	local entry name n arch kdir
	for name in "$@"; do
		if [ "$name" = host ]; then
			picked host || continue
			host
			echo "this machine's kernel" >"$results/host/about"
			uname -r >"$results/host/package"
			continue
		fi
		for entry in "${matrix[@]}"; do
			read -r n arch _ <<<"$entry"
			[ "$n" = "$name" ] && picked "$name" || continue
			kdir=$cache/kernel-$name
			boot "$name" "$arch" "$(ls "$kdir"/boot/vmlinuz-*)"
		done
	done
}
arm=() amd=()
for entry in "${matrix[@]}"; do
	read -r name arch _ <<<"$entry"
	if [ "$arch" = arm64 ]; then arm+=("$name"); else amd+=("$name"); fi
done
lane "${arm[@]}" "${amd[-1]}" &
pids+=($!)
lane "${amd[@]:0:${#amd[@]}-1}" host &
pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
for entry in "${matrix[@]}"; do
	read -r name _ <<<"$entry"
	picked "$name" || continue
	cp "$cache/kernel-$name/.pkg" "$results/$name/package"
	cp "$cache/kernel-$name/.about" "$results/$name/about"
done
BROKERTRACE_KERNELS="$results" go test -tags kernels -count=1 -v ./internal/kernels
