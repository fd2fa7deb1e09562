# make test: what CI runs (.ci/run) and what contributors run before a change.
# End-to-end tests against a real sshd fail instead of skipping unless
# HPNCP_E2E is overridden (make test HPNCP_E2E=).

GO ?= go
HPNCP_E2E ?= require
# Extra go test flags; .ci/run sets -v so that skipped tests are listed.
GOTESTFLAGS ?=

.PHONY: test build

test:
	./scripts/ensure-deps.sh
	$(GO) vet ./...
	HPNCP_E2E=$(HPNCP_E2E) $(GO) test -race -count=1 $(GOTESTFLAGS) ./...

build:
	$(GO) build -o hpncp ./cmd/hpncp
