package release

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/pem"
	"errors"
	"fmt"

	"golang.org/x/crypto/ssh"
)

// Namespace is the SSHSIG namespace of a release's signature: ssh-keygen
// -Y sign -n expiryctl-release. A signature made by the same key for
// another purpose (a git commit, a file of another project) is in another
// namespace and does not verify as a release.
const Namespace = "expiryctl-release"

// ed25519KeyType is the only key type a release signature may use.
const ed25519KeyType = ssh.KeyAlgoED25519

// sigMagic opens both an SSHSIG blob and the data its signature covers
// (OpenSSH's PROTOCOL.sshsig); sigPEMType is the armor's PEM type.
const (
	sigMagic   = "SSHSIG"
	sigVersion = 1
	sigPEMType = "SSH SIGNATURE"
)

// PublicKey is a release key: an Ed25519 key as SSH reads it.
type PublicKey struct {
	key ssh.PublicKey
}

// Fingerprint is the key's SHA-256 fingerprint as ssh-keygen -l prints it.
func (k PublicKey) Fingerprint() string { return ssh.FingerprintSHA256(k.key) }

func (k PublicKey) equal(o PublicKey) bool { return bytes.Equal(k.key.Marshal(), o.key.Marshal()) }

// parsePublicKey reads a key's wire form (the base64 field of an
// authorized_keys or allowed_signers line, decoded).
func parsePublicKey(wire []byte) (PublicKey, error) {
	key, err := ssh.ParsePublicKey(wire)
	if err != nil {
		return PublicKey{}, fmt.Errorf("the key is malformed: %w", err)
	}
	if key.Type() != ed25519KeyType {
		return PublicKey{}, fmt.Errorf("the key is %s: a release key is %s", key.Type(), ed25519KeyType)
	}
	return PublicKey{key: key}, nil
}

// sshsigBlob is an SSHSIG after its magic, in SSH's wire form.
type sshsigBlob struct {
	Version   uint32
	PublicKey []byte
	Namespace string
	Reserved  []byte
	HashAlg   string
	Signature []byte
}

// signedData is what an SSHSIG's signature covers, after the magic.
type signedData struct {
	Namespace string
	Reserved  []byte
	HashAlg   string
	Hash      []byte
}

// signature is a parsed SSHSIG.
type signature struct {
	key       PublicKey
	namespace string
	hashAlg   string
	sig       *ssh.Signature
}

// parseSignature reads an armored SSHSIG, as ssh-keygen -Y sign writes it.
func parseSignature(armored []byte) (signature, error) {
	block, _ := pem.Decode(armored)
	if block == nil || block.Type != sigPEMType {
		return signature{}, errors.New("it is not an SSH signature (no -----BEGIN " + sigPEMType + "----- block)")
	}
	rest, ok := bytes.CutPrefix(block.Bytes, []byte(sigMagic))
	if !ok {
		return signature{}, errors.New("the SSH signature does not start with " + sigMagic)
	}
	var blob sshsigBlob
	if err := ssh.Unmarshal(rest, &blob); err != nil {
		return signature{}, fmt.Errorf("the SSH signature is malformed: %w", err)
	}
	if blob.Version != sigVersion {
		return signature{}, fmt.Errorf("the SSH signature is version %d, not %d", blob.Version, sigVersion)
	}
	key, err := parsePublicKey(blob.PublicKey)
	if err != nil {
		return signature{}, err
	}
	sig := new(ssh.Signature)
	if err := ssh.Unmarshal(blob.Signature, sig); err != nil {
		return signature{}, fmt.Errorf("the SSH signature's signature is malformed: %w", err)
	}
	// Reserved is ignored, as ssh-keygen ignores it.
	return signature{key: key, namespace: blob.Namespace, hashAlg: blob.HashAlg, sig: sig}, nil
}

// verifies reports whether s signs message in namespace.
func (s signature) verifies(message []byte, namespace string) error {
	if s.namespace != namespace {
		return fmt.Errorf("it is a signature in the namespace %q, not %q", s.namespace, namespace)
	}
	var digest []byte
	switch s.hashAlg {
	case "sha512":
		sum := sha512.Sum512(message)
		digest = sum[:]
	case "sha256":
		sum := sha256.Sum256(message)
		digest = sum[:]
	default:
		return fmt.Errorf("the signature's hash %q is not sha512 or sha256", s.hashAlg)
	}
	signed := append([]byte(sigMagic), ssh.Marshal(signedData{Namespace: s.namespace, HashAlg: s.hashAlg, Hash: digest})...)
	if err := s.key.key.Verify(signed, s.sig); err != nil {
		return errors.New("the signature does not match the file's bytes: the file changed after it was signed")
	}
	return nil
}
