#!/usr/bin/env bash
# Runs every fuzz target of the module (each `func FuzzX` in a _test.go)
# for a few seconds, in two lanes: `go test` alone only replays the
# seeds and the testdata/fuzz/FuzzX corpora. The whole run stays within
# about FUZZ_BUDGET seconds of fuzzing (default 45, split evenly; with the
# builds about 1.3 minutes in all on a warm build cache, 5.6 on a fresh
# machine). A failing input is
# written to the package's testdata/fuzz/FuzzX/ by go test: keep it there
# as a regression case once the bug is fixed.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
GO=${GO:-go}
budget=${FUZZ_BUDGET:-45}

targets=()
while IFS= read -r line; do
	file=${line%%:*}
	name=${line#*:func }
	name=${name%%(*}
	targets+=("./$(dirname "$file") $name")
done < <(grep -r --include='*_test.go' -o '^func Fuzz[A-Za-z0-9_]*(' . | sed 's|^\./||' | sort)
if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 1
fi

# Each run spends ~2.5 s linking (the build is cached) and starting workers.
per=$((budget * 10 / ${#targets[@]} - 25)) # tenths of a second
[ "$per" -ge 10 ] || per=10
echo "fuzz.sh: ${#targets[@]} targets, $((per / 10)).$((per % 10))s each"
# fuzz runs one target; go test's fuzzing coordinator reports "context
# deadline exceeded" when -fuzztime runs out before its workers have
# started (a loaded machine): that run is repeated with twice the time,
# once. Any other failure, and a failing input, fail the script.
fuzz() {
	local pkg=$1 name=$2 tenths=$3 out
	if out=$($GO test -run '^$' -parallel 1 -fuzz "^${name}\$" -fuzztime "$((tenths / 10)).$((tenths % 10))s" "$pkg" 2>&1); then
		return 0
	fi
	if grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input' <<<"$out" && [ "${4:-}" != again ]; then
		fuzz "$pkg" "$name" $((tenths * 2)) again
		return
	fi
	grep -v '^fuzz: elapsed' <<<"$out" >&2
	return 1
}

# Two lanes, one per CPU (each target with one fuzzing worker): most of a
# run is linking its test binary and starting it, one CPU's work; one lane
# after another the 24 targets took two minutes.
lanes=${FUZZ_LANES:-2}
failed=$(mktemp)
trap 'rm -f "$failed"' EXIT
lane() {
	local i
	for ((i = $1; i < ${#targets[@]}; i += lanes)); do
		read -r pkg name <<<"${targets[$i]}"
		if ! fuzz "$pkg" "$name" "$per"; then
			echo "fuzz.sh: $name in $pkg failed" >&2
			echo "$name" >>"$failed"
			return
		fi
		echo "ok  $name $pkg"
	done
}
# Build each package's fuzzing binary first, one package after another:
# -fuzz instruments every package it links, the standard library's too,
# and two lanes starting cold compiled that same instrumented tree twice
# at once (on a fresh machine the first target of each lane took 4
# minutes, the whole script 9). go build uses both CPUs for one package's
# dependencies anyway.
prev=
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	[ "$pkg" = "$prev" ] && continue
	prev=$pkg
	if ! $GO test -c -o /dev/null -fuzz "^${name}\$" "$pkg"; then
		echo "fuzz.sh: building $pkg for fuzzing failed" >&2
		exit 1
	fi
done
for ((l = 0; l < lanes; l++)); do
	lane "$l" &
done
wait
if [ -s "$failed" ]; then
	exit 1
fi
