#!/usr/bin/env bash
# scripts/promtool.sh makes sure promtool, Prometheus's checker of scrapes,
# alert rules and rule unit tests, is on this machine (Debian 12) for
# `make test` and `make alerts`:
#
#   promtool   from Debian's prometheus package, into $PROMTOOL_DIR
#              (default /usr/local/bin)
#
# Only the promtool binary is taken out of the package. Installing the
# package itself would add a prometheus user, its web UI's JavaScript
# packages and a Prometheus server whose service the package's postinst
# enables and starts; a test machine needs none of that, and a server left
# running would scrape and listen on :9090 for nothing. So the .deb is
# downloaded with `apt-get download` and promtool extracted with dpkg-deb:
# nothing runs, nothing is registered with dpkg, and removing the one file
# undoes it.
#
# It is safe to run again and again: when promtool is already there (the
# common case) it only asks it for its version and finishes at once. It
# prints one line per step to stderr and exits non-zero with the reason when
# a step fails. Downloading needs network, and root unless $PROMTOOL_DIR is
# writable and the apt lists are current.
set -euo pipefail

export PATH="/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}"
export LC_ALL=C

readonly PROMTOOL_DIR="${PROMTOOL_DIR:-/usr/local/bin}"

step() { printf 'promtool: %s\n' "$*" >&2; }
die() {
	printf 'promtool: error: %s\n' "$*" >&2
	exit 1
}

installed_version() {
	local bin
	bin=$(command -v promtool 2>/dev/null) || return 1
	"$bin" --version 2>/dev/null | head -n 1
}

if version=$(installed_version); then
	step "${version:-promtool} is installed ($(command -v promtool))"
	exit 0
fi

[[ -w $PROMTOOL_DIR || $(id -u) -eq 0 ]] ||
	die "installing promtool into $PROMTOOL_DIR needs root: run 'sudo scripts/promtool.sh' or set PROMTOOL_DIR to a writable directory on PATH"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# apt's download sandbox user must be able to write the directory.
chmod 0755 "$tmp"
chown _apt "$tmp" 2>/dev/null || true

download() { (cd "$tmp" && apt-get download -qq prometheus >&2 </dev/null); }

step "downloading Debian's prometheus package (for promtool only; nothing is installed or started)"
if ! download; then
	[[ $(id -u) -eq 0 ]] || die "apt-get download prometheus failed; as root this script would run apt-get update first"
	step "apt-get update"
	apt-get update -qq >&2 || die "apt-get update failed (no network or no apt sources?)"
	download || die "apt-get download prometheus failed"
fi

deb=$(compgen -G "$tmp/prometheus_*.deb" | head -n 1) || die "apt-get download left no prometheus .deb in $tmp"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" ./usr/bin/promtool ||
	die "$(basename "$deb") holds no ./usr/bin/promtool"
mkdir -p "$PROMTOOL_DIR"
install -m 0755 "$tmp/usr/bin/promtool" "$PROMTOOL_DIR/promtool"
version=$(installed_version) || die "$PROMTOOL_DIR/promtool does not run (is $PROMTOOL_DIR on PATH?)"
step "installed ${version:-promtool} from $(basename "$deb") into $PROMTOOL_DIR"
