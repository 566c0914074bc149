package release

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Namespace is the SSHSIG namespace of a release's signature: ssh-keygen
// -Y sign -n expiryctl-release. A signature made by the same key for
// another purpose (a git commit, a file of another project) is in another
// namespace and does not verify as a release.
const Namespace = "expiryctl-release"

// ed25519KeyType is the only key type a release signature may use.
const ed25519KeyType = "ssh-ed25519"

const (
	sigMagic   = "SSHSIG"
	sigVersion = 1
	sigBegin   = "-----BEGIN SSH SIGNATURE-----"
	sigEnd     = "-----END SSH SIGNATURE-----"
)

// PublicKey is an Ed25519 key in SSH's wire form.
type PublicKey struct {
	key ed25519.PublicKey
}

// Fingerprint is the key's SHA-256 fingerprint as ssh-keygen -l prints it:
// "SHA256:" and the unpadded base64 of the hash of its wire form.
func (k PublicKey) Fingerprint() string {
	sum := sha256.Sum256(k.wire())
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

func (k PublicKey) wire() []byte {
	var b []byte
	b = appendString(b, []byte(ed25519KeyType))
	return appendString(b, k.key)
}

func (k PublicKey) equal(o PublicKey) bool { return bytes.Equal(k.key, o.key) }

// parsePublicKey reads a key's wire form (the base64 field of an
// authorized_keys or allowed_signers line, decoded).
func parsePublicKey(wire []byte) (PublicKey, error) {
	kind, rest, ok := readString(wire)
	if !ok {
		return PublicKey{}, errors.New("the key is cut short")
	}
	if string(kind) != ed25519KeyType {
		return PublicKey{}, fmt.Errorf("the key is %s: a release key is %s", kind, ed25519KeyType)
	}
	key, rest, ok := readString(rest)
	if !ok || len(rest) != 0 || len(key) != ed25519.PublicKeySize {
		return PublicKey{}, errors.New("the ssh-ed25519 key is malformed")
	}
	return PublicKey{key: ed25519.PublicKey(key)}, nil
}

// signature is a parsed SSHSIG.
type signature struct {
	key       PublicKey
	namespace string
	hashAlg   string
	sig       []byte
}

// parseSignature reads an armored SSHSIG, as ssh-keygen -Y sign writes it.
func parseSignature(armored []byte) (signature, error) {
	text := strings.TrimSpace(string(armored))
	body, ok := strings.CutPrefix(text, sigBegin)
	if !ok {
		return signature{}, errors.New("it is not an SSH signature (no " + sigBegin + " line)")
	}
	body, ok = strings.CutSuffix(body, sigEnd)
	if !ok {
		return signature{}, errors.New("the SSH signature has no " + sigEnd + " line")
	}
	blob, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(body), ""))
	if err != nil {
		return signature{}, fmt.Errorf("the SSH signature is not base64: %w", err)
	}
	rest, ok := bytes.CutPrefix(blob, []byte(sigMagic))
	if !ok || len(rest) < 4 {
		return signature{}, errors.New("the SSH signature does not start with SSHSIG")
	}
	if v := binary.BigEndian.Uint32(rest); v != sigVersion {
		return signature{}, fmt.Errorf("the SSH signature is version %d, not %d", v, sigVersion)
	}
	rest = rest[4:]
	var fields [5][]byte
	for i := range fields {
		if fields[i], rest, ok = readString(rest); !ok {
			return signature{}, errors.New("the SSH signature is cut short")
		}
	}
	if len(rest) != 0 {
		return signature{}, errors.New("the SSH signature has bytes after its end")
	}
	key, err := parsePublicKey(fields[0])
	if err != nil {
		return signature{}, err
	}
	s := signature{key: key, namespace: string(fields[1]), hashAlg: string(fields[3])}
	// fields[2] is reserved, and ignored as ssh-keygen ignores it.
	kind, raw, ok := readString(fields[4])
	if !ok || string(kind) != ed25519KeyType {
		return signature{}, fmt.Errorf("the SSH signature is not an %s signature", ed25519KeyType)
	}
	if s.sig, rest, ok = readString(raw); !ok || len(rest) != 0 || len(s.sig) != ed25519.SignatureSize {
		return signature{}, errors.New("the ssh-ed25519 signature is malformed")
	}
	return s, nil
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
	signed := []byte(sigMagic)
	signed = appendString(signed, []byte(s.namespace))
	signed = appendString(signed, nil)
	signed = appendString(signed, []byte(s.hashAlg))
	signed = appendString(signed, digest)
	if !ed25519.Verify(s.key.key, signed, s.sig) {
		return errors.New("the signature does not match the file's bytes: the file changed after it was signed")
	}
	return nil
}

// readString reads one SSH wire string: a 4-byte big-endian length, then
// that many bytes.
func readString(b []byte) (s, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, false
	}
	return b[4 : 4+n], b[4+n:], true
}

func appendString(b, s []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}
