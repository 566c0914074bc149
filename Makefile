# Makefile for expiryctl. `make help` lists the targets.
#
# Targets that talk to PostgreSQL or RabbitMQ first run scripts/services.sh,
# which starts (and on a fresh Debian machine installs) both and is a quick
# no-op when they already run. To use servers you manage yourself, skip it:
#   make test SERVICES=:

GO       ?= go
BIN      := bin/expiryctl
SERVICES ?= bash scripts/services.sh
NODE     ?= bash scripts/node.sh
PROMTOOL ?= bash scripts/promtool.sh
FUZZTIME ?= 60s
BENCH_ARGS ?=
ARCHIVE ?=
LINT_ARGS ?=

.DEFAULT_GOAL := build

.PHONY: help services node promtool build test faults soak vet alerts demo bench lint docs schema fuzz release image clean

help: ## list targets
	@awk -F':.*## ' '/^[a-z]+:.*## / { printf "  %-9s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

services: ## start (or install) PostgreSQL and RabbitMQ on this machine
	$(SERVICES)

node: ## install Node.js and the npm packages of the Node.js interop tests and the demo (e2e/node)
	$(NODE)

promtool: ## install promtool (from Debian's prometheus package, without its server)
	$(PROMTOOL)

# -buildvcs=auto: `expiryctl version` reports the commit from the build
# information, which a GOFLAGS of -buildvcs=false would leave out.
build: ## build bin/expiryctl
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/expiryctl

vet: ## go vet ./...
	$(GO) vet ./...

# End-to-end tests run the binary built here, the way a user would; they find it
# through EXPIRYCTL_BIN.
test: services node promtool build vet ## vet, then all tests (unit, PostgreSQL, RabbitMQ, end-to-end)
	EXPIRYCTL_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 15m ./...

# The slow fault tests behind the build tag faults (a PostgreSQL failover to a
# promoted replica, a three-node RabbitMQ cluster losing a node, an SQS
# capture through throttles and 5xx answers, and through an SQS outage under
# --follow, and a silent SQS); `make test` does not run them.
faults: services build ## the slow fault tests (build tag faults): a PostgreSQL failover, a RabbitMQ cluster losing a node, SQS faults
	EXPIRYCTL_BIN=$(CURDIR)/$(BIN) $(GO) test -tags faults -count=1 -timeout 20m ./... -run 'Cluster|Failover|RidesOut|SilentSQS'

# The soak behind the build tag soak: ten minutes of `dlq ingest --follow` at
# 500 letters/s with a fault every 30 s, on private servers behind toxiproxy
# links; neither `make test` nor .ci/run runs it. A shorter run while
# developing: make soak SOAK_DURATION=90s (SOAK_RATE, SOAK_FAULT_EVERY and
# SOAK_MAX_RATIO too; see docs/operations.md).
SOAK_DURATION    ?= 10m
SOAK_RATE        ?= 500
SOAK_FAULT_EVERY ?= 30s
SOAK_MAX_RATIO   ?= 1.5

soak: services build ## the soak (build tag soak): 10 minutes of dlq ingest --follow at 500/s, a fault every 30 s
	SOAK_DURATION=$(SOAK_DURATION) SOAK_RATE=$(SOAK_RATE) SOAK_FAULT_EVERY=$(SOAK_FAULT_EVERY) SOAK_MAX_RATIO=$(SOAK_MAX_RATIO) \
	EXPIRYCTL_BIN=$(CURDIR)/$(BIN) $(GO) test -tags soak -count=1 -timeout 40m -v ./e2e -run '^TestSoakIngestFollow$$'

# The alert rules and their unit tests (also run by `make test`, through
# internal/adapter/metrics).
alerts: promtool ## check docs/alerts' rules and run their promtool unit tests
	promtool check rules docs/alerts/expiryctl.rules.yml
	cd docs/alerts && promtool test rules expiryctl.rules_test.yml

# The demo runs governed: the schema's owner (not a superuser) migrates,
# grants the people their groups and stages the incident; alice requests a
# replay, bob approves it as shown, alice runs it and audrey verifies the trail.
# Its BullMQ incident is a Node.js service's (e2e/node/demo_bullmq.js), on
# the packages scripts/node.sh installs.
DEMO_DB  := postgres://%s@127.0.0.1:5432/expiryctl_demo?sslmode=disable
# The demo's queues are named DEMO_PREFIX.reservation-expiry and so on, never
# the production names on a shared broker; DEMO_PREFIX= (empty) uses them.
DEMO_PREFIX ?= expiryctl-demo

demo: services node build ## stage an incident, capture it, replay it under four-eyes (as people, not a superuser); DEMO_PREFIX names its queues
	EXPIRYCTL_DATABASE_URL=$(subst %s,expiryctl_owner,$(DEMO_DB)) DEMO_PREFIX=$(DEMO_PREFIX) bash scripts/demo.sh $(BIN)

# ARCHIVE=10m runs the large-archive scenario alone instead (list, summary,
# capture, purge, bytes on disk and memory on an archive of that size).
bench: services build ## run the benchmark: make bench BENCH_ARGS='...', or make bench ARCHIVE=10m
	$(GO) run ./cmd/expiryctl-bench $(if $(ARCHIVE),-archive $(ARCHIVE)) $(BENCH_ARGS)

# golangci-lint is built from tools/go.mod on first use (a few minutes), then
# cached. Extra arguments: make lint LINT_ARGS='--fix'.
lint: ## gofmt check, go vet and golangci-lint (.golangci.yml)
	GO=$(GO) bash scripts/lint.sh $(LINT_ARGS)

docs: ## regenerate the command reference in docs/reference
	$(GO) run ./cmd/gen-docs docs/reference

# A new migration, or a change to a function's file in store/functions/,
# changes the schema that schema.sql shows. A new migration is pinned in
# migrations.sum in the commit that adds it; a pinned line is never rewritten.
schema: services ## regenerate store/schema.sql and pin new migrations in migrations.sum
	$(GO) test -count=1 ./store -run '^(TestSchemaIsCurrent|TestMigrationChecksums)$$' -update

fuzz: ## fuzz the dead-letter parser for FUZZTIME (60s)
	$(GO) test -run XXX -fuzz FuzzParse -fuzztime $(FUZZTIME) ./deadletter/

# The release: archives for linux and darwin on amd64 and arm64, a .deb and
# an .rpm per linux architecture, man pages, completions, a CycloneDX SBOM,
# SHA256SUMS and its SSH signature, into dist/, offline and reproducibly
# (scripts/release.sh says how). EXPIRYCTL_RELEASE_KEY names the release
# key; without it the build is an unsigned snapshot and says so. One
# platform while developing: make release PLATFORMS=linux/amd64.
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

release: ## build dist/: archives, .deb/.rpm, SBOM, SHA256SUMS(.sig); EXPIRYCTL_RELEASE_KEY signs
	GO=$(GO) PLATFORMS="$(PLATFORMS)" bash scripts/release.sh

# The container image, FROM scratch, from dist/'s linux/amd64 archive (run
# `make release` first). Needs a docker daemon; CI does not build it.
IMAGE ?= expiryctl:snapshot

image: ## build the container image IMAGE (expiryctl:snapshot) from dist/ (after make release)
	IMAGE=$(IMAGE) bash scripts/image.sh

clean: ## remove build outputs
	rm -rf bin/ dist/ coverage.out coverage.html *.test *.prof
