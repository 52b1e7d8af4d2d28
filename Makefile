# herald: `make run` serves the API on the local stack, `make test` runs every test on it.
# The stack (PostgreSQL, Redis, Kafka; Jaeger for `test`; mailpit, Jaeger and Prometheus for
# `run`) is installed and started by deploy/local/stack.sh; see docs/local-stack.md.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.ONESHELL:
.DEFAULT_GOAL := help

# go.mod names the Go toolchain herald is built with (a patch release with the standard
# library's security fixes); the go command fetches it from the module proxy once. A
# GOTOOLCHAIN set in the environment wins.
export GOTOOLCHAIN ?= auto

STACK := deploy/local/stack.sh
TOOLS := deploy/local/tools.sh
# Packages and extra flags for test/bench, e.g. `make test PKG=./ingest/... TESTFLAGS='-run Idem'`.
PKG ?= ./...
TESTFLAGS ?=
BENCHFLAGS ?=
# The bench suite (bench/suite, docs/benchmarks.md): `make bench SCENARIO=relay BENCH_SCALE=0.1`;
# BENCH_REPEAT=2 runs each scenario twice to measure the run-to-run noise.
SCENARIO ?=
BENCH_SCALE ?= 1
BENCH_REPEAT ?= 1
# The suite is a module of its own (gonum/plot stays out of herald's go.mod).
SUITE := go -C bench/suite run .
# How long `make fuzz` runs each fuzz target (a long run: `make fuzz FUZZTIME=30m`), or how many
# inputs (`FUZZTIME=20000x`, what CI runs: no wall-clock deadline for Go 1.26's fuzz
# coordinator to race, golang/go#75804).
FUZZTIME ?= 20s

.PHONY: help build image run test fuzz bench bench-go bench-smoke bench-compare lint stack-up stack-down stack-status

help:
	@echo "make run           stack up, build, migrate, print a dev API key, herald serve"
	@echo "make test          stack up (and chromium), go test -race on every package (PKG=, TESTFLAGS=)"
	@echo "make bench         stack up, the bench suite: bench/out/<UTC time>/report.md (SCENARIO=, BENCH_SCALE=, BENCH_REPEAT=)"
	@echo "make bench-smoke   the suite at BENCH_SCALE=0.01 and a check that its report is complete (CI)"
	@echo "make bench-compare A=bench/out/<run> B=bench/out/<run>   two runs' figures side by side"
	@echo "make bench-go      stack up, the Go micro and end-to-end benchmarks (PKG=, BENCHFLAGS=)"
	@echo "make build         bin/herald"
	@echo "make image         the container image with buildah, FROM scratch (IMAGE=localhost/herald:<version>)"
	@echo "make fuzz          every Go fuzz target for FUZZTIME each (default 20s)"
	@echo "make lint          gofmt, go vet, staticcheck, govulncheck (offline database), go mod tidy check"
	@echo "make stack-up | stack-down | stack-status"

build:
	go build -o bin/herald ./cmd/herald

# The container image (deploy/image/Containerfile; docs/deploy.md): buildah, podman and runc
# from Debian's packages, then a static binary FROM scratch. IMAGE names it (default
# localhost/herald:<git describe>).
IMAGE ?=
image:
	deploy/local/containers.sh install
	deploy/image/build.sh $(IMAGE)

run:
	deploy/local/run.sh

# Jaeger serves the end-to-end trace test (its first build takes minutes: here, not inside a
# test's timeout); promtool checks and tests the Prometheus rules; buildah and podman build
# and run the container image (cmd/herald's TestContainerImage).
test:
	$(STACK) up
	deploy/local/chromium.sh install
	$(STACK) up jaeger
	$(STACK) install prometheus
	deploy/local/containers.sh install
	eval "$$($(STACK) env)"
	go test -race -count=1 -timeout 30m $(TESTFLAGS) $(PKG)
	go -C bench/suite test -race -count=1 $(TESTFLAGS) ./...
	# The Helm chart's tests are a module of their own (Helm and the Kubernetes types stay out
	# of herald's go.mod); they only render and decode, so no -race (it would double the
	# build of the Kubernetes packages for no concurrency to check).
	go -C deploy/helm test -count=1 $(TESTFLAGS) ./...

bench:
	$(STACK) up
	eval "$$($(STACK) env)"
	$(SUITE) -root "$(CURDIR)" -scenario '$(SCENARIO)' -scale '$(BENCH_SCALE)' -repeat '$(BENCH_REPEAT)'

# CI: every scenario at a tiny scale, then the completeness check of what it wrote (figures
# are not asserted). The check runs even when a scenario failed, so that its list is whole.
bench-smoke:
	$(STACK) up
	eval "$$($(STACK) env)"
	rc=0
	$(SUITE) -root "$(CURDIR)" -scenario '$(SCENARIO)' -scale 0.01 || rc=$$?
	$(SUITE) check -scenario '$(SCENARIO)' "$(CURDIR)/bench/out/latest" || rc=1
	exit $$rc

bench-compare:
	@test -n "$(A)" -a -n "$(B)" || { echo "usage: make bench-compare A=bench/out/<run> B=bench/out/<run>"; exit 2; }
	$(SUITE) compare "$(abspath $(A))" "$(abspath $(B))"

# The Go benchmarks other than the suite's scenarios (micro-benchmarks, bench/e2e's).
bench-go:
	$(STACK) up
	eval "$$($(STACK) env)"
	go test -run '^$$' -bench . -skip '^BenchmarkScenario' -benchmem $(BENCHFLAGS) $(PKG)

# Each fuzz target runs alone (go test -fuzz takes one target per package at a time); the
# integration fuzz targets need the stack like the tests do. Targets are found by name in the
# test files, so that packages without one are not built for listing.
fuzz:
	$(STACK) up
	eval "$$($(STACK) env)"
	for file in $$(grep -rl --include='*_test.go' --exclude-dir=.stack '^func Fuzz' .); do
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file"); do
			echo "fuzz $$(dirname "$$file") $$target ($(FUZZTIME))"
			go test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) "./$$(dirname "$$file")"
		done
	done

lint:
	$(TOOLS) install
	eval "$$($(TOOLS) env)"
	unformatted="$$(gofmt -l $$(find . -name '*.go' -not -path './.stack/*' -not -path './bin/*'))"
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	go mod tidy -diff
	go -C bench/suite mod tidy -diff
	go vet $(PKG)
	go -C bench/suite vet ./...
	# bench/river is a module of its own (River stays out of herald's go.mod).
	go -C bench/river mod tidy -diff
	go -C bench/river vet ./...
	# deploy/helm: the chart's tests (Helm SDK, Kubernetes types).
	go -C deploy/helm mod tidy -diff
	go -C deploy/helm vet ./...
	staticcheck $(PKG)
	govulncheck -db "$$GOVULNDB" $(PKG)

stack-up:
	$(STACK) up

stack-down:
	$(STACK) down

stack-status:
	$(STACK) status
