# distlock: `make demo` shows what it is for, `make test` proves it works.
SHELL := /bin/bash
GO    ?= go
GOBIN := $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(shell command -v staticcheck 2>/dev/null || echo $(GOBIN)/staticcheck)

# The repository's Go modules. make test runs the tests of every module in
# MODULES; the modules in BUILD_MODULES are linted and their tests built,
# not run (bench's tests are its benchmarks). Add a new module to one list.
MODULES       := . cmd/distlock examples otel etcdlock gocronlock
BUILD_MODULES := bench etcdlock/internal/etcdserver/cmd

.PHONY: all deps deps-demo deps-bench test test-scripts lint demo bench fuzz torture

all: test

deps:
	@scripts/install-deps.sh test

deps-demo:
	@scripts/install-deps.sh demo

deps-bench:
	@scripts/install-deps.sh bench

# Packages tested without the race detector (a regular expression of import
# paths). zklock's tests reconnect to ZooKeeper on purpose (killed leaders,
# partitions) and by accident on a loaded machine, and go-zookeeper v1.0.4
# reads its last-seen zxid while re-registering watches as its receive loop,
# already running, writes it (samuel/go-zookeeper#260): a report in the
# client, not in this code, that would fail runs at random. zklock's tests
# still run, without -race.
NORACE := .*/zklock

# The full suite, against real servers the tests start themselves. A missing
# server fails the run (DISTLOCK_REQUIRE_SERVERS=1) instead of skipping.
test: deps lint test-scripts
	@set -e; for m in $(BUILD_MODULES); do \
	  echo "== $$m: building the tests"; \
	  out=$$(cd $$m && $(GO) test -count=1 -run '^$$' ./... 2>&1) || { echo "$$out"; exit 1; }; \
	done
	@set -e; for m in $(MODULES); do \
	  echo "== $$m: go test"; \
	  (cd $$m && pkgs=$$($(GO) list ./...) && \
	    race=$$(grep -vxE '$(NORACE)' <<<"$$pkgs" || true) && \
	    norace=$$(grep -xE '$(NORACE)' <<<"$$pkgs" || true) && \
	    DISTLOCK_REQUIRE_SERVERS=1 $(GO) test -race -count=1 -timeout 30m $$race && \
	    if [ -n "$$norace" ]; then DISTLOCK_REQUIRE_SERVERS=1 $(GO) test -count=1 -timeout 30m $$norace; fi); \
	done

# The scripts' own tests.
test-scripts:
	scripts/install-deps_test.sh

lint:
	@unformatted=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	@set -e; for m in $(MODULES) $(BUILD_MODULES); do \
	  echo "== $$m: go vet, staticcheck"; \
	  (cd $$m && $(GO) vet ./... && $(STATICCHECK) ./...); \
	done

demo: deps-demo
	cd cmd/distlock && $(GO) run . demo

# A minute per backend under every fault, against servers the command starts
# itself (make test runs a few seconds of each: TestTortureOwnServers).
TORTURE_DURATION ?= 60s
torture: deps-bench
	@set -e; for s in redis sentinel redlock zk etcd postgres mariadb sqlite; do \
	  (cd cmd/distlock && $(GO) run . torture --servers $$s --duration $(TORTURE_DURATION)); echo; \
	done

bench: deps-bench
	scripts/bench.sh

# Fuzz the URL and flag parsers for a while (FUZZTIME=1m make fuzz).
FUZZTIME ?= 30s
fuzz:
	for f in FuzzOpen FuzzRunArgs FuzzStatusArgs; do \
	  (cd cmd/distlock && $(GO) test . -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME)) || exit 1; \
	done
