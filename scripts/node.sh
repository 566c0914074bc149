#!/usr/bin/env bash
# scripts/node.sh makes sure the Node.js side of the interop end-to-end test
# (e2e/node_interop_test.go) can run on this machine (Debian 12):
#
#   node, npm   from Debian's nodejs and npm packages when node is missing
#   e2e/node/node_modules   exactly what e2e/node/package-lock.json pins
#               (amqplib), installed with `npm ci`
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

ensure_modules() {
	local want
	want=$(sha256sum "$NODE_DIR/package-lock.json" | cut -d' ' -f1)
	if [[ -f $STAMP && $(cat "$STAMP") == "$want" && -d $NODE_DIR/node_modules/amqplib ]]; then
		step "e2e/node/node_modules matches package-lock.json"
		return
	fi
	step "npm ci in e2e/node"
	(cd "$NODE_DIR" && npm ci --no-audit --no-fund >&2 </dev/null) || die "npm ci in $NODE_DIR failed"
	printf '%s\n' "$want" >"$STAMP"
	step "e2e/node/node_modules matches package-lock.json"
}

ensure_node
ensure_modules
