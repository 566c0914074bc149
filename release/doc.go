// Package release is what a user checks before trusting an expiryctl
// binary: which build is running (build.go), and whether a downloaded
// release is the one its key signed (verify.go).
//
// A release directory holds the archives and packages, a SHA256SUMS file
// listing each with its SHA-256, and SHA256SUMS.sig, an SSH signature
// (the SSHSIG format of `ssh-keygen -Y sign`) over SHA256SUMS in the
// namespace "expiryctl-release". The signature is checked against an
// allowed_signers file (allowed_signers.go), with the same rules as
// `ssh-keygen -Y verify`, so that a user who trusts neither expiryctl nor
// this package can check the same download with ssh-keygen alone. The
// SSHSIG reader (sshsig.go) leaves SSH's wire format, keys and signature
// checks to golang.org/x/crypto/ssh, and takes Ed25519 keys only: a
// release key is one, and a verifier that accepts less is one that can be
// fooled less.
//
// The package imports nothing of expiryctl's: it stands on the lowest
// floor, so that commands may report and check the build and an
// auditor's own tool may import the verifier.
package release
