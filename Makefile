# make test: what CI runs (.ci/run) and what contributors run before a change.
# End-to-end tests against a real sshd fail instead of skipping unless
# HPNCP_E2E is overridden (make test HPNCP_E2E=).

GO ?= go
HPNCP_E2E ?= require
# Extra go test flags; .ci/run sets -v so that skipped tests are listed.
GOTESTFLAGS ?=
# How long each fuzz target (scripts/fuzz.sh lists them) runs: briefly on
# every test run, longer with make fuzz.
FUZZTIME ?= 5s
FUZZTIME_LONG ?= 5m

.PHONY: test fuzz build faults confine bench-wan bench-lan bench-many release-check

test:
	./scripts/ensure-deps.sh
	$(GO) vet ./...
	@# The releases (goreleaser.yaml) build for these too.
	@for os in darwin freebsd windows; do \
		GOOS=$$os $(GO) build -o /dev/null ./cmd/hpncp || { echo "make test: FAIL: GOOS=$$os go build ./cmd/hpncp"; exit 1; }; \
	done
	@unformatted=$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$unformatted" ]; then echo "gofmt -w these files:"; echo "$$unformatted"; exit 1; fi
	./scripts/design-check.sh
	@# The fuzz targets run beside the tests, one worker at a time: the
	@# tests leave part of the CPU idle while they wait on connections.
	@# Their output is held and printed after the tests'.
	@fuzzlog=$$(mktemp); \
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZPARALLEL=1 ./scripts/fuzz.sh >"$$fuzzlog" 2>&1 & fuzz=$$!; \
	trap 'kill $$fuzz 2>/dev/null; rm -f "$$fuzzlog"' EXIT; \
	echo "HPNCP_E2E=$(HPNCP_E2E) $(GO) test -race -count=1 -timeout 25m $(GOTESTFLAGS) ./..."; \
	HPNCP_E2E=$(HPNCP_E2E) $(GO) test -race -count=1 -timeout 25m $(GOTESTFLAGS) ./...; tested=$$?; \
	wait $$fuzz; fuzzed=$$?; \
	echo "scripts/fuzz.sh (FUZZTIME=$(FUZZTIME), run beside the tests):"; cat "$$fuzzlog"; \
	if [ $$fuzzed -ne 0 ]; then echo "make test: FAIL: scripts/fuzz.sh"; fi; \
	GO=$(GO) HPNCP_E2E=$(HPNCP_E2E) GOTESTFLAGS="$(GOTESTFLAGS)" ./scripts/clone-fs.sh; cloned=$$?; \
	if [ $$cloned -ne 0 ]; then echo "make test: FAIL: scripts/clone-fs.sh"; fi; \
	[ $$tested -eq 0 ] && [ $$fuzzed -eq 0 ] && [ $$cloned -eq 0 ]

# Every parser of bytes from a server or the disk, fuzzed for
# FUZZTIME_LONG each; new failing inputs land in the packages'
# testdata/fuzz.
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME_LONG) ./scripts/fuzz.sh

build:
	$(GO) build -o hpncp ./cmd/hpncp

# Fault trials (cmd/hpncp/faults_test.go): FAULT_TRIALS randomised copies
# of every case against the in-process server and FAULT_SSHD_TRIALS
# against a real sshd, under cut, reset, stalled and slowed connections,
# FAULT_PARALLEL at once; prints the counts per case, and each violation
# with the command that re-runs it. make test runs a fixed few; this runs
# thousands (about 30 minutes with the defaults). Then STRIPE_FAULT_TRIALS
# striped commands through the helper (helper/faults_test.go), one channel
# cut or stalled at a seeded byte, both ways.
FAULT_TRIALS ?= 100
STRIPE_FAULT_TRIALS ?= 1000
FAULT_SSHD_TRIALS ?= 5
FAULT_SEED ?= 1
FAULT_PARALLEL ?= 4
faults:
	./scripts/ensure-deps.sh
	@report=$$(mktemp); \
	HPNCP_E2E=$(HPNCP_E2E) HPNCP_FAULT_TRIALS=$(FAULT_TRIALS) HPNCP_FAULT_SSHD_TRIALS=$(FAULT_SSHD_TRIALS) \
		HPNCP_FAULT_SEED=$(FAULT_SEED) HPNCP_FAULT_REPORT=$$report \
		$(GO) test -count=1 -timeout 6h -parallel $(FAULT_PARALLEL) -run '^TestFaults(SSHD)?$$' ./cmd/hpncp; \
	status=$$?; cat $$report; rm -f $$report; \
	HPNCP_STRIPE_FAULT_TRIALS=$(STRIPE_FAULT_TRIALS) HPNCP_FAULT_SEED=$(FAULT_SEED) \
		$(GO) test -count=1 -timeout 2h -v -run '^TestStripedFaults$$' ./helper || status=1; \
	exit $$status

# Confinement trials (cmd/hpncp/confine_test.go): CONFINE_TRIALS seeded
# sequences of hostile trees and runs against internal/hostile, from
# CONFINE_SEED on; prints the counts per front end (runs, exits 0, clean
# failures, runs stopped after 5 s, escapes) and each escape with the
# command that re-runs it.
# make test runs a fixed 20.
CONFINE_TRIALS ?= 5000
CONFINE_SEED ?= 1
CONFINE_PARALLEL ?= 4
confine:
	@report=$$(mktemp); \
	HPNCP_CONFINE_TRIALS=$(CONFINE_TRIALS) HPNCP_CONFINE_SEED=$(CONFINE_SEED) HPNCP_CONFINE_REPORT=$$report \
		$(GO) test -count=1 -timeout 12h -parallel $(CONFINE_PARALLEL) -run '^TestConfine$$' ./cmd/hpncp; \
	status=$$?; cat $$report; rm -f $$report; exit $$status

# Benchmarks (root: network namespaces). Not part of test: they take
# minutes and want a quiet machine. See bench/README.md.
bench-wan:
	bench/wan.sh --out bench/results-wan.md

bench-lan:
	bench/lan.sh

bench-many:
	bench/many.sh --out bench/results-many.md

# Release packaging (scripts/release-check.sh): validate goreleaser.yaml,
# build every target as a snapshot, pack the archives, the .deb and .rpm
# packages and checksums into dist/ (nothing is published) and check what
# each holds. Not part of test: building goreleaser itself takes minutes
# the first time.
GORELEASER ?= $(GO) run github.com/goreleaser/goreleaser/v2@v2.15.1
release-check:
	GORELEASER="$(GORELEASER)" ./scripts/release-check.sh
