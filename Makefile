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
# How long `make fuzz` runs each fuzz target (a long run: `make fuzz FUZZTIME=30m`).
FUZZTIME ?= 20s

.PHONY: help build run test fuzz bench lint stack-up stack-down stack-status

help:
	@echo "make run           stack up, build, migrate, print a dev API key, herald serve"
	@echo "make test          stack up (and chromium), go test -race on every package (PKG=, TESTFLAGS=)"
	@echo "make bench         stack up, Go benchmarks and bench/run.sh (BENCHFLAGS=)"
	@echo "make build         bin/herald"
	@echo "make fuzz          every Go fuzz target for FUZZTIME each (default 20s)"
	@echo "make lint          gofmt, go vet, staticcheck, govulncheck (offline database), go mod tidy check"
	@echo "make stack-up | stack-down | stack-status"

build:
	go build -o bin/herald ./cmd/herald

run:
	deploy/local/run.sh

# Jaeger serves the end-to-end trace test (its first build takes minutes: here, not inside a
# test's timeout); promtool checks and tests the Prometheus rules.
test:
	$(STACK) up
	deploy/local/chromium.sh install
	$(STACK) up jaeger
	$(STACK) install prometheus
	eval "$$($(STACK) env)"
	go test -race -count=1 -timeout 30m $(TESTFLAGS) $(PKG)

bench:
	$(STACK) up
	eval "$$($(STACK) env)"
	go test -run '^$$' -bench . -benchmem $(BENCHFLAGS) $(PKG)
	bench/run.sh

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
	go vet $(PKG)
	# bench/river is a module of its own (River stays out of herald's go.mod).
	(cd bench/river && go mod tidy -diff && go vet ./...)
	staticcheck $(PKG)
	govulncheck -db "$$GOVULNDB" $(PKG)

stack-up:
	$(STACK) up

stack-down:
	$(STACK) down

stack-status:
	$(STACK) status
