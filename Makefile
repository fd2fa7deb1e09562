# make test: what CI runs (.ci/run) and what contributors run before a change.
# End-to-end tests against a real sshd fail instead of skipping unless
# HPNCP_E2E is overridden (make test HPNCP_E2E=).

GO ?= go
HPNCP_E2E ?= require
# Extra go test flags; .ci/run sets -v so that skipped tests are listed.
GOTESTFLAGS ?=
# How long each fuzz target (scripts/fuzz.sh lists them) runs: briefly on
# every test run, longer with make fuzz.
FUZZTIME ?= 8s
FUZZTIME_LONG ?= 5m

.PHONY: test fuzz build bench-wan bench-lan bench-many release-check

test:
	./scripts/ensure-deps.sh
	$(GO) vet ./...
	HPNCP_E2E=$(HPNCP_E2E) $(GO) test -race -count=1 $(GOTESTFLAGS) ./...
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

# Every parser of bytes from a server or the disk, fuzzed for
# FUZZTIME_LONG each; new failing inputs land in the packages'
# testdata/fuzz.
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME_LONG) ./scripts/fuzz.sh

build:
	$(GO) build -o hpncp ./cmd/hpncp

# Benchmarks (root: network namespaces). Not part of test: they take
# minutes and want a quiet machine. See bench/README.md.
bench-wan:
	bench/wan.sh --out bench/results-wan.md

bench-lan:
	bench/lan.sh

bench-many:
	bench/many.sh --out bench/results-many.md

# Release packaging: validate .goreleaser.yaml, build every target as a
# snapshot and pack the archives and checksums into dist/ (nothing is
# published). Not part of test: building goreleaser itself takes
# minutes the first time.
GORELEASER ?= $(GO) run github.com/goreleaser/goreleaser/v2@v2.15.1
release-check:
	$(GORELEASER) check
	$(GORELEASER) release --snapshot --clean --skip=publish
