# brokertrace — see README.md. Every target installs what it needs.
SHELL := /bin/bash
GO ?= go
export CGO_ENABLED := 0
export PATH := $(PATH):/usr/local/go/bin:/usr/sbin:/sbin

# Debian packages the build, demo and tests need; installed when missing.
APT_PKGS := clang llvm libbpf-dev bpftool iproute2 procps psmisc util-linux python3 tcpdump ethtool linux-perf bpftrace \
	nats-server mosquitto redis-server rabbitmq-server activemq default-jre-headless gnuplot-nox chromium \
	qemu-user-static prometheus qemu-system-x86 qemu-system-arm cpio podman runc

.PHONY: all build deps generate check-generated cross kernels test bench soak demo cluster-demo clean mutate frame-agreement

all: build

# DuckDB, for the check that docs/cluster-join.sql joins as brokertrace
# cluster does: its Node.js API from the npm registry (its binary inside),
# into .cache/duckdb; installed when missing.
DUCKDB_NODE_API := 1.5.6-r.1

deps:
	@scripts/deps.sh $(APT_PKGS)
	@scripts/duckdb-deps.sh $(DUCKDB_NODE_API)

build:
	$(GO) build -trimpath -o bin/brokertrace ./cmd/brokertrace

generate: deps
	$(GO) generate ./probes/...

# Fails when the committed BPF objects do not match bpf/ (see the script).
check-generated: deps
	scripts/check-generated.sh

# The arm64 build: cgo-free, with the arm64 BPF objects committed beside
# amd64's; Debian's qemu-user-static runs its --help. Not run on an arm64
# kernel (README, "Where it was tested").
cross: deps
	GOARCH=arm64 $(GO) build -trimpath -o bin/brokertrace-arm64 ./cmd/brokertrace
	qemu-aarch64-static bin/brokertrace-arm64 --help >/dev/null
	@echo "bin/brokertrace-arm64 builds and runs its --help under qemu-aarch64-static"

# The kernel matrix (scripts/kernels.sh, about 11 minutes on 2 cores): Debian's 5.10,
# 6.1 and 6.12 for amd64 and 6.1 for arm64 under qemu (TCG), and this
# machine's kernel with tracefs and debugfs unmounted; each records
# nats-server with every source and runs the socket probe's tests. The
# README's "Where it was tested" table is its output.
kernels: deps build cross
	scripts/kernels.sh

# The fuzz targets run a few seconds each and every benchmark runs once, so
# that their assertions (nothing dropped, every marker found) run in CI too:
# each package's after its tests, in the same binary (one link, one start
# of its brokers), one package at a time, so that timing-sensitive tests
# meet a machine that only runs them; the kernel matrix last.
# Under sudo brokertrace writes as the user who ran it (README, Security);
# the tests are root's, and set SUDO_UID themselves where they test that.
ASROOT := env -u SUDO_UID -u SUDO_GID -u SUDO_USER

test: deps build check-generated cross
	$(GO) vet ./...
	$(ASROOT) GO=$(GO) scripts/fuzz.sh
	$(ASROOT) $(GO) test -count=1 -bench . -benchtime 1x -timeout 30m -p 1 ./...
	$(ASROOT) scripts/kernels.sh

# Benchmarks print each figure next to its floor measured in the same run;
# then `brokertrace overhead --quick` (MooBench method, README "Overhead")
# on nats-server (about 1.5 minutes) and ActiveMQ (about 6 minutes). The README
# table is `brokertrace overhead --markdown` without --quick. Then the model
# loop (scripts/model-bench.sh, about 25 minutes) on nats-server, ActiveMQ
# and RabbitMQ: a sweep that finds each broker's knee, calibration on its
# regular steps, model files, the prediction beside the measurement, and
# the same model against a second sweep with another ladder (the README's
# tables). Then the frame parser's cost against the marker scan's on the
# same calls of five brokers (scripts/same-calls.sh, about 10 minutes;
# README "On the same calls").
OVERHEAD_FLAGS ?= --quick
# The memory soak: SOAK_SECONDS=3600 for the goal's hour (RSS <= 150 MB,
# flat, at 100 000 msg/s).
SOAK_SECONDS ?= 120

bench: deps build
	$(GO) test -run '^$$' -bench . -benchtime 2s -timeout 30m -p 1 ./...
	bin/brokertrace overhead $(OVERHEAD_FLAGS) --broker nats --out brokertrace-overhead-nats
	bin/brokertrace overhead $(OVERHEAD_FLAGS) --broker activemq --out brokertrace-overhead-activemq
	scripts/model-bench.sh brokertrace-model
	scripts/same-calls.sh brokertrace-same-calls
	-SOAK_SECONDS=$(SOAK_SECONDS) scripts/soak.sh

# The goal's hour: RSS <= 150 MB and flat at 100 000 msg/s (about 62 minutes).
soak: deps build
	SOAK_SECONDS=3600 scripts/soak.sh

# Mutation check of the kernel marker scanner and frame parser
# (scripts/mutate.sh): lists every mutant of bpf/sockio.bpf.c and
# bpf/frame.bpf.h the socket probe's tests fail to kill. Several minutes,
# so not part of test.
mutate: deps
	scripts/mutate.sh

# The table of matching by frame against matching by marker (README):
# two recordings of each broker at once under loads of unique payloads,
# then of identical payloads; every row (make test runs those that stress
# matching most).
frame-agreement: deps
	BT_AGREEMENT_OUT=$(CURDIR)/frame-agreement.md $(ASROOT) $(GO) test -count=1 -v -run '^TestFrame(AgreesWithMarker|IdenticalPayloads)$$' ./cmd/brokertrace
	cat frame-agreement.md

demo: deps build
	scripts/demo.sh

# A 3-node NATS cluster in network namespaces, each node recorded, the
# recordings joined into each message's path (brokertrace cluster).
cluster-demo: deps build
	scripts/cluster-demo.sh

clean:
	rm -rf bin
