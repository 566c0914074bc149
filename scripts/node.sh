#!/usr/bin/env bash
# scripts/node.sh makes sure the Node.js side of the interop end-to-end tests
# (e2e/node_interop_test.go, e2e/sqs_node_interop_test.go), the BullMQ
# driver's tests against a real BullMQ (internal/adapter/bullmq) and the
# pg-boss driver's against a real pg-boss (internal/adapter/pgboss,
# e2e/node/pgboss_worker.js), and make demo's BullMQ incident
# (e2e/node/demo_bullmq.js), can run on this machine (Debian 12):
#
#   node, npm   from Debian's nodejs and npm packages when node is missing
#   e2e/node/node_modules   exactly what e2e/node/package-lock.json pins
#               (amqplib, @aws-sdk/client-sqs, bullmq, pg, pg-boss), installed
#               with `npm ci`
#
# The AWS SDK for JavaScript supports Node.js 20 and later (package.json's
# engines). Debian 12's nodejs is 18, on which the AWS and BullMQ tests were
# seen to pass: the script warns and goes on, but a machine that runs them
# regularly should have Node.js 20 or later. pg-boss 12 declares Node.js
# 22.12 or later; the pg-boss driver's tests run it on Node.js 20 (20.20),
# where what they use works, and need 20.3 or later (AbortSignal.any): on
# Node.js 18 they fail. npm ci warns of the engine (EBADENGINE) and installs.
#
# It is safe to run again and again: when node is there and node_modules was
# installed from the current lockfile (the common case), it only compares a
# checksum and finishes at once. It prints one line per step to stderr and
# exits non-zero with the reason when a step fails. Installing packages needs
# root and network.
set -euo pipefail

export PATH="/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}"
export LC_ALL=C

readonly NODE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../e2e/node" && pwd)"
# STAMP holds the checksum of the lockfile node_modules was installed from.
readonly STAMP="$NODE_DIR/node_modules/.expiryctl-lockfile.sha256"
# PACKAGES are the packages the tests load; a node_modules without one of
# them is installed again whatever the stamp says.
readonly PACKAGES=(amqplib @aws-sdk/client-sqs bullmq bullmq6 ioredis pg pg-boss)
# NODE_MAJOR is the oldest Node.js major version e2e/node/package.json's
# engines accept.
readonly NODE_MAJOR=20

step() { printf 'node: %s\n' "$*" >&2; }
die() {
	printf 'node: error: %s\n' "$*" >&2
	exit 1
}

ensure_node() {
	if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
		step "node $(node --version) and npm $(npm --version) are installed"
		return
	fi
	[[ $(id -u) -eq 0 ]] || die "installing nodejs and npm needs root: run 'sudo scripts/node.sh'"
	step "apt-get update"
	apt-get update -qq >&2 || die "apt-get update failed (no network or no apt sources?)"
	# A node without npm (some images ship one) gets only npm.
	local pkgs=(npm)
	command -v node >/dev/null 2>&1 || pkgs=(nodejs npm)
	step "installing ${pkgs[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >&2 </dev/null ||
		die "apt-get install ${pkgs[*]} failed"
	step "node $(node --version) and npm $(npm --version) are installed"
}

# check_node_version warns when node is older than package.json's engines.
check_node_version() {
	local major
	major=$(node -p 'process.versions.node.split(".")[0]')
	if ((major < NODE_MAJOR)); then
		printf 'node: warning: node %s is older than %s, the oldest the AWS SDK for JavaScript supports (e2e/node/package.json engines); install Node.js %s or later\n' \
			"$(node --version)" "$NODE_MAJOR" "$NODE_MAJOR" >&2
	fi
}

modules_installed() {
	local pkg
	for pkg in "${PACKAGES[@]}"; do
		[[ -d $NODE_DIR/node_modules/$pkg ]] || return 1
	done
}

ensure_modules() {
	local want
	want=$(sha256sum "$NODE_DIR/package-lock.json" | cut -d' ' -f1)
	if [[ -f $STAMP && $(cat "$STAMP") == "$want" ]] && modules_installed; then
		step "e2e/node/node_modules matches package-lock.json"
		return
	fi
	step "npm ci in e2e/node"
	(cd "$NODE_DIR" && npm ci --no-audit --no-fund >&2 </dev/null) || die "npm ci in $NODE_DIR failed"
	printf '%s\n' "$want" >"$STAMP"
	step "e2e/node/node_modules matches package-lock.json"
}

ensure_node
check_node_version
ensure_modules
