# distlock: `make demo` shows what it is for, `make test` proves it works.
SHELL := /bin/bash
GO    ?= go
GOBIN := $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(shell command -v staticcheck 2>/dev/null || echo $(GOBIN)/staticcheck)

.PHONY: all deps test lint demo bench fuzz

all: test

deps:
	@scripts/install-deps.sh

# The full suite, against real servers the tests start themselves. A missing
# server fails the run (DISTLOCK_REQUIRE_SERVERS=1) instead of skipping.
test: deps lint
	DISTLOCK_REQUIRE_SERVERS=1 $(GO) test -race -count=1 -timeout 30m ./...

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@if [ -f bench/go.mod ]; then cd bench && $(GO) vet ./...; fi

demo: deps
	$(GO) run ./cmd/distlock demo

bench: deps
	scripts/bench.sh

# Fuzz the URL and flag parsers for a while (FUZZTIME=1m make fuzz).
FUZZTIME ?= 30s
fuzz:
	for f in FuzzOpen FuzzRunArgs FuzzStatusArgs; do \
	  $(GO) test ./cmd/distlock -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) || exit 1; \
	done
