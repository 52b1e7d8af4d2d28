# herald: `make run` serves the API on the local stack, `make test` runs every test on it.
# The stack (PostgreSQL, Redis, Kafka; mailpit for `run`) is installed and started by
# deploy/local/stack.sh; see docs/local-stack.md.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.ONESHELL:
.DEFAULT_GOAL := help

STACK := deploy/local/stack.sh
# Packages and extra flags for test/bench, e.g. `make test PKG=./ingest/... TESTFLAGS='-run Idem'`.
PKG ?= ./...
TESTFLAGS ?=
BENCHFLAGS ?=

.PHONY: help build run test bench lint stack-up stack-down stack-status

help:
	@echo "make run           stack up, build, migrate, print a dev API key, herald serve"
	@echo "make test          stack up, go test -race on every package (PKG=, TESTFLAGS=)"
	@echo "make bench         stack up, Go benchmarks and bench/run.sh (BENCHFLAGS=)"
	@echo "make build         bin/herald"
	@echo "make lint          gofmt and go vet"
	@echo "make stack-up | stack-down | stack-status"

build:
	go build -o bin/herald ./cmd/herald

run:
	deploy/local/run.sh

test:
	$(STACK) up
	eval "$$($(STACK) env)"
	go test -race -count=1 -timeout 30m $(TESTFLAGS) $(PKG)

bench:
	$(STACK) up
	eval "$$($(STACK) env)"
	go test -run '^$$' -bench . -benchmem $(BENCHFLAGS) $(PKG)
	bench/run.sh

lint:
	unformatted="$$(gofmt -l $$(find . -name '*.go' -not -path './.stack/*' -not -path './bin/*'))"
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	go vet $(PKG)

stack-up:
	$(STACK) up

stack-down:
	$(STACK) down

stack-status:
	$(STACK) status
