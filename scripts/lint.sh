#!/usr/bin/env bash
# scripts/lint.sh is `make lint`: the gofmt check, go vet, then golangci-lint
# with the configuration in .golangci.yml.
#
# golangci-lint is not installed on the machine: it is a tool of the module in
# tools/ (its own go.mod, so its many dependencies stay out of the product's),
# built from the Go module proxy at the version tools/go.mod pins. The first
# run on a machine builds it, which takes a few minutes; later runs find it in
# the Go build cache. Arguments go to `golangci-lint run`, e.g.
#   bash scripts/lint.sh --fix ./bench/...
#
# Environment (optional):
#   GO   the go command to use (go)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}

step() { printf 'lint: %s\n' "$*" >&2; }
die() {
	printf 'lint: error: %s\n' "$*" >&2
	exit 1
}

# golangci-lint checks the files of the default build only; this also covers
# the files behind build tags (audit/recording_on.go, *_other.go). Files under
# testdata/ may be unformatted on purpose.
step "gofmt"
unformatted=$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -not -path './vendor/*' -print0 | xargs -0 -r gofmt -l)
if [[ -n $unformatted ]]; then
	printf '%s\n' "$unformatted" >&2
	die "these files need formatting (run gofmt -w)"
fi

step "go vet"
"$GO" vet ./...

# The first run on a machine builds golangci-lint before it starts.
step "golangci-lint (built from tools/go.mod on first use: a few minutes)"
"$GO" tool -modfile=tools/go.mod golangci-lint run "$@"
