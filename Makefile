# distlock: `make demo` shows what it is for, `make test` proves it works.
SHELL := /bin/bash
GO    ?= go
GOBIN := $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(shell command -v staticcheck 2>/dev/null || echo $(GOBIN)/staticcheck)

# The repository's Go modules. make test runs the tests of every module in
# MODULES; the modules in BUILD_MODULES are linted and their tests built,
# not run (bench's tests are its benchmarks). Add a new module to one list.
MODULES       := . examples otel
BUILD_MODULES := bench

.PHONY: all deps deps-demo test test-scripts lint demo bench fuzz

all: test

deps:
	@scripts/install-deps.sh test

deps-demo:
	@scripts/install-deps.sh demo

# The full suite, against real servers the tests start themselves. A missing
# server fails the run (DISTLOCK_REQUIRE_SERVERS=1) instead of skipping.
test: deps lint test-scripts
	@set -e; for m in $(BUILD_MODULES); do \
	  echo "== $$m: building the tests"; \
	  out=$$(cd $$m && $(GO) test -count=1 -run '^$$' ./... 2>&1) || { echo "$$out"; exit 1; }; \
	done
	@set -e; for m in $(MODULES); do \
	  echo "== $$m: go test"; \
	  (cd $$m && DISTLOCK_REQUIRE_SERVERS=1 $(GO) test -race -count=1 -timeout 30m ./...); \
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
	$(GO) run ./cmd/distlock demo

bench: deps-demo
	scripts/bench.sh

# Fuzz the URL and flag parsers for a while (FUZZTIME=1m make fuzz).
FUZZTIME ?= 30s
fuzz:
	for f in FuzzOpen FuzzRunArgs FuzzStatusArgs; do \
	  $(GO) test ./cmd/distlock -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) || exit 1; \
	done
