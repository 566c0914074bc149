#!/usr/bin/env bash
# scripts/image.sh is `make image`: it builds the container image of
# packaging/Dockerfile from dist/'s linux/amd64 release archive (run `make
# release` first), with no registry: the image is FROM scratch.
#
# The build context is made here, in a temporary directory: the binary
# unpacked from the archive that SHA256SUMS lists (checked against it
# first), and the CA certificates of this machine's Debian
# ca-certificates package.
#
# Environment (optional):
#   DIST   the release directory (dist)
#   IMAGE  the image's name (expiryctl:snapshot)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
DIST=${DIST:-dist}
IMAGE=${IMAGE:-expiryctl:snapshot}
CERTS=/etc/ssl/certs/ca-certificates.crt

die() {
	printf 'image: error: %s\n' "$*" >&2
	exit 1
}

command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "no docker daemon answers (docker info fails)"
[[ -r $CERTS ]] || die "$CERTS is missing (on Debian: apt-get install ca-certificates)"
shopt -s nullglob
archives=("$DIST"/expiryctl_*_linux_amd64.tar.gz)
((${#archives[@]} == 1)) || die "want one linux/amd64 archive in $DIST, found ${#archives[@]}: run make release first"
archive=${archives[0]}
(cd "$DIST" && sha256sum --check --ignore-missing --quiet SHA256SUMS) ||
	die "$DIST does not match its SHA256SUMS"

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
tar -xzf "$archive" -C "$context" --strip-components=1 --wildcards '*/expiryctl'
cp "$CERTS" "$context/ca-certificates.crt"
cp packaging/Dockerfile "$context/Dockerfile"
docker build --tag "$IMAGE" "$context"
docker run --rm "$IMAGE" version
