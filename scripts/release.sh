#!/usr/bin/env bash
# scripts/release.sh is `make release`: it builds, offline and reproducibly,
# everything a release ships into dist/:
#
#   expiryctl_VERSION_OS_ARCH.tar.gz  linux and darwin, amd64 and arm64: the
#                                     binary, man pages, shell completions
#   expiryctl_VERSION_ARCH.deb/.rpm   linux: the same, installed under /usr
#   expiryctl_VERSION.cdx.json        a CycloneDX SBOM of the module graph
#   SHA256SUMS                        the SHA-256 of each of the above
#   SHA256SUMS.sig                    an SSH signature of SHA256SUMS
#   allowed_signers                   the signing key's public half
#
# Two runs on one commit write byte-identical archives, packages, SBOM and
# SHA256SUMS (release/reproducible_test.go checks it): the binaries are
# built with -trimpath and -buildvcs=true (the commit, its time and whether
# the tree was modified come from git, never from the clock), every file
# and the packages are dated SOURCE_DATE_EPOCH, the commit's time, and tar
# and gzip are told to leave out owners, order and timestamps.
#
# The signature: EXPIRYCTL_RELEASE_KEY names the release's private key (or
# its .pub file, with the private key in ssh-agent or on a hardware token;
# see docs/install.md). Without it the script signs with a throwaway key
# made for this run, writes dist/UNSIGNED-SNAPSHOT and says so loudly: such
# a build is for testing, never for publishing.
#
# The tools (nfpm for the packages, cyclonedx-gomod for the SBOM) are tools
# of the module in tools/release, built from the Go module cache on first use
# (about a minute) and then cached.
#
# Environment (optional):
#   GO                     the go command (go)
#   DIST                   the output directory (dist), emptied first
#   PLATFORMS              OS/ARCH pairs to build (linux/amd64 linux/arm64
#                          darwin/amd64 darwin/arm64); packages are built for
#                          the linux ones
#   VERSION                the version to stamp (the tag at HEAD, else a Go
#                          pseudo-version of HEAD)
#   EXPIRYCTL_RELEASE_KEY  the release key (see above)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
GO=${GO:-go}
DIST=${DIST:-dist}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
MODULE=github.com/expiryctl/expiryctl

step() { printf 'release: %s\n' "$*" >&2; }
die() {
	printf 'release: error: %s\n' "$*" >&2
	exit 1
}

# ssh-keygen signs SHA256SUMS; Debian's openssh-client has it, and a
# minimal image may lack it.
if ! command -v ssh-keygen >/dev/null && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
	step "installing openssh-client (for ssh-keygen)"
	apt-get install -y -qq openssh-client >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq openssh-client >/dev/null; }
fi
for tool in git tar gzip sha256sum ssh-keygen; do
	command -v "$tool" >/dev/null || die "$tool is not installed (on Debian: apt-get install git tar gzip coreutils openssh-client)"
done
# --sort=name is GNU tar's; a BSD tar would write the entries in directory
# order, which differs between file systems.
tar --version 2>/dev/null | grep -q 'GNU tar' || die "tar is not GNU tar: the archives need its --sort=name"

# Everything that could carry the machine's clock, zone or locale is pinned
# to the commit.
export TZ=UTC LC_ALL=C
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct HEAD)
export SOURCE_DATE_EPOCH
commit=$(git rev-parse HEAD)
# As Go's own vcs.modified: untracked files count too (dist/ is ignored).
modified=false
if [[ -n $(git status --porcelain) ]]; then
	modified=true
fi
if [[ -z ${VERSION:-} ]]; then
	if VERSION=$(git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null); then
		:
	else
		# The pseudo-version Go itself gives an untagged commit.
		VERSION=v0.0.0-$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d%H%M%S)-${commit:0:12}
	fi
	if $modified; then
		VERSION+=+dirty
	fi
fi
[[ $VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || die "VERSION $VERSION is not vMAJOR.MINOR.PATCH[-PRE][+BUILD]"
step "expiryctl $VERSION, commit $commit ($(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)), modified: $modified"
if $modified; then
	step "warning: the work tree has uncommitted changes: the binaries say so (modified), and a release is built from a clean checkout of its tag"
fi

# The Go flags are spelled out, not inherited: a GOFLAGS of -buildvcs=false
# (as on some CI machines) would drop the commit from the binaries.
export GOFLAGS=-mod=readonly CGO_ENABLED=0
# The commit is linked in too: Go stamps it itself only from a .git
# directory, and a release built in a git worktree must name it all the same.
commit_time=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w -X $MODULE/commands.Version=$VERSION -X $MODULE/commands.Commit=$commit"
ldflags+=" -X $MODULE/commands.CommitTime=$commit_time -X $MODULE/commands.Modified=$modified"
gobuild() { "$GO" build -trimpath -buildvcs=true -ldflags "$ldflags" "$@"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$DIST"
mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)

# The tools are built once into $work/bin (from the Go build cache after
# the first run), so that nfpm can run inside the staged tree it packages.
step "nfpm and cyclonedx-gomod from tools/release/go.mod (the first run on a machine builds them: about a minute)"
"$GO" build -modfile=tools/release/go.mod -o "$work/bin/" tool

# Man pages and completions come from the command tree, the same for every
# platform: generated once, by a binary for this machine.
step "man pages and completions"
gobuild -o "$work/host/expiryctl" ./cmd/expiryctl
mkdir -p "$work/shared/man/man1" "$work/shared/completions"
"$GO" run -trimpath ./cmd/gen-docs -man -source "expiryctl $VERSION" "$work/shared/man/man1"
gzip -n -9 "$work"/shared/man/man1/*.1
"$work/host/expiryctl" completion bash >"$work/shared/completions/expiryctl.bash"
"$work/host/expiryctl" completion zsh >"$work/shared/completions/_expiryctl"
"$work/host/expiryctl" completion fish >"$work/shared/completions/expiryctl.fish"

# archive writes DIR (under $work/stage) as NAME.tar.gz: entries by name,
# dated SOURCE_DATE_EPOCH, owned by 0:0 with no user names, modes from the
# files (not the umask), and gzip without a name or a time.
archive() {
	local dir=$1 out=$2
	chmod -R u+rwX,go+rX,go-w "$work/stage/$dir"
	tar --sort=name --format=gnu --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
		-C "$work/stage" -cf - "$dir" | gzip -n -9 >"$out"
}

for platform in $PLATFORMS; do
	goos=${platform%/*} goarch=${platform#*/}
	name=expiryctl_${VERSION}_${goos}_${goarch}
	step "$name"
	root=$work/stage/$name
	mkdir -p "$root"
	GOOS=$goos GOARCH=$goarch gobuild -o "$root/expiryctl" ./cmd/expiryctl
	cp -R "$work/shared/man" "$work/shared/completions" "$root/"
	cp README.md docs/install.md "$root/"
	archive "$name" "$DIST/$name.tar.gz"

	if [[ $goos == linux ]]; then
		for packager in deb rpm; do
			(cd "$root" && PKG_VERSION=$VERSION PKG_ARCH=$goarch \
				"$work/bin/nfpm" package --config "$repo/packaging/nfpm.yaml" --packager "$packager" --target "$work/pkg.$packager" >/dev/null)
			# nfpm names the file after the packager's conventions
			# (x86_64, ~ for a pre-release); the release names every
			# file one way.
			mv "$work/pkg.$packager" "$DIST/expiryctl_${VERSION}_${goos}_${goarch}.$packager"
		done
	fi
done

# The SBOM lists the module graph go.mod and go.sum pin: every module a
# build of expiryctl may use, with its version and hash. No serial number
# and no timestamp: both would differ on every run, and the commit's time
# is in the version already.
step "SBOM (cyclonedx-gomod, from tools/release/go.mod)"
"$work/bin/cyclonedx-gomod" mod -json -noserial -notimestamp -output-version 1.5 \
	-output "$DIST/expiryctl_${VERSION}.cdx.json" . 2>"$work/sbom.log" ||
	{
		cat "$work/sbom.log" >&2
		die "cyclonedx-gomod failed"
	}

step "SHA256SUMS"
(cd "$DIST" && sha256sum -- *.tar.gz *.deb *.rpm *.cdx.json 2>/dev/null | sort -k2 >SHA256SUMS)

# The signature is ssh-keygen's own format (SSHSIG), so that a user checks
# it with ssh-keygen alone: ssh-keygen -Y verify -f allowed_signers -I
# release@expiryctl -n expiryctl-release -s SHA256SUMS.sig < SHA256SUMS.
key=${EXPIRYCTL_RELEASE_KEY:-}
principal=release@expiryctl
if [[ -z $key ]]; then
	key=$work/throwaway-key
	principal=snapshot@expiryctl
	ssh-keygen -q -t ed25519 -N '' -C 'expiryctl snapshot: throwaway key, not a release key' -f "$key"
	cat >"$DIST/UNSIGNED-SNAPSHOT" <<EOF
This build is NOT signed by the expiryctl release key.

EXPIRYCTL_RELEASE_KEY was not set, so scripts/release.sh signed SHA256SUMS
with a throwaway key made for this run and deleted after it. The signature
shows only that SHA256SUMS is the one this run wrote. Do not publish these
files as a release.
EOF
fi
[[ -r $key ]] || die "EXPIRYCTL_RELEASE_KEY=$key cannot be read"
public=${key%.pub}.pub
if [[ ! -r $public ]]; then
	ssh-keygen -y -f "$key" >"$work/release-key.pub" || die "cannot read the public half of $key"
	public=$work/release-key.pub
fi
printf '%s namespaces="expiryctl-release" %s\n' "$principal" "$(cut -d' ' -f1,2 "$public")" >"$DIST/allowed_signers"
ssh-keygen -q -Y sign -f "$key" -n expiryctl-release "$DIST/SHA256SUMS" </dev/null ||
	die "ssh-keygen could not sign with $key (a key with a passphrase: load it into ssh-agent and set EXPIRYCTL_RELEASE_KEY to its .pub)"
ssh-keygen -Y verify -f "$DIST/allowed_signers" -I "$principal" -n expiryctl-release \
	-s "$DIST/SHA256SUMS.sig" <"$DIST/SHA256SUMS" >/dev/null ||
	die "the signature just made does not verify"
if [[ -n ${EXPIRYCTL_RELEASE_KEY:-} ]] && [[ -r packaging/allowed_signers ]] &&
	! grep -qF "$(cut -d' ' -f2 "$public")" packaging/allowed_signers; then
	step "warning: the key signing this release is not in packaging/allowed_signers: users who verify against it will refuse the release"
fi

(cd "$DIST" && ls -l --time-style=+ -- * | awk 'NR > 1 || !/^total/ { printf "  %10s  %s\n", $5, $NF }') >&2
if [[ -z ${EXPIRYCTL_RELEASE_KEY:-} ]]; then
	cat >&2 <<EOF

release: ************************************************************************
release: UNSIGNED SNAPSHOT: SHA256SUMS is signed with a throwaway key, NOT the
release: expiryctl release key (EXPIRYCTL_RELEASE_KEY is not set). Do not publish.
release: ************************************************************************
EOF
else
	step "signed by $(ssh-keygen -l -f "$public" | cut -d' ' -f2) as $principal"
fi
