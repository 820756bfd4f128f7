#!/usr/bin/env bash
# Installs the Debian packages named as arguments that are missing
# (idempotent: nothing happens when all are there). Service start-ups are
# blocked during the install with a policy-rc.d, as in containers: the
# brokers' packages would otherwise start system-wide instances on their
# default ports; brokertrace's demo and tests start their own, on free ports.
set -euo pipefail
missing=()
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing Debian packages: ${missing[*]}; run as root (sudo make …) to install them" >&2
	exit 4
fi
echo "installing: ${missing[*]}"
created=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	created=1
fi
trap '[ -n "$created" ] && rm -f /usr/sbin/policy-rc.d' EXIT
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
