package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sshKeygen runs ssh-keygen, the tool a user verifies a release with,
// failing the test with how to get it when it is missing.
func sshKeygen(t *testing.T, stdin []byte, args ...string) ([]byte, error) {
	t.Helper()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Fatal("ssh-keygen is not installed: apt-get install openssh-client")
	}
	cmd := exec.Command("ssh-keygen", args...)
	cmd.Stdin = bytes.NewReader(stdin)
	return cmd.CombinedOutput()
}

// newKey makes an Ed25519 key in dir and returns its private key's path.
func newKey(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if out, err := sshKeygen(t, nil, "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	return path
}

func publicKey(t *testing.T, key string) string {
	t.Helper()
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(pub))
	return fields[0] + " " + fields[1]
}

// releaseDir writes a small release signed by key, as scripts/release.sh
// lays it out, and returns its directory.
func releaseDir(t *testing.T, key string) string {
	t.Helper()
	dir := t.TempDir()
	var sums strings.Builder
	for _, name := range []string{"expiryctl_v1.2.0_darwin_arm64.tar.gz", "expiryctl_v1.2.0_linux_amd64.deb", "expiryctl_v1.2.0_linux_amd64.tar.gz"} {
		body := []byte("the bytes of " + name)
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), name)
	}
	if err := os.WriteFile(filepath.Join(dir, SumsFile), []byte(sums.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	sign(t, key, dir)
	return dir
}

func sign(t *testing.T, key, dir string) {
	t.Helper()
	_ = os.Remove(filepath.Join(dir, SignatureFile))
	if out, err := sshKeygen(t, nil, "-q", "-Y", "sign", "-f", key, "-n", Namespace, filepath.Join(dir, SumsFile)); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
}

func signersFile(t *testing.T, lines ...string) (string, []Signer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "allowed_signers")
	data := []byte(strings.Join(lines, "\n") + "\n")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	signers, err := ParseSigners(path, data)
	if err != nil {
		t.Fatal(err)
	}
	return path, signers
}

// sshVerify is the one-liner docs/install.md gives a user.
func sshVerify(t *testing.T, dir, signers, principal string) error {
	t.Helper()
	sums, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	out, err := sshKeygen(t, sums, "-Y", "verify", "-f", signers, "-I", principal, "-n", Namespace, "-s", filepath.Join(dir, SignatureFile))
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

func TestVerifyRelease(t *testing.T) {
	t.Parallel()
	keys := t.TempDir()
	releaseKey, otherKey := newKey(t, keys, "release"), newKey(t, keys, "other")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	signersPath, signers := signersFile(t, `release@expiryctl namespaces="expiryctl-release" `+publicKey(t, releaseKey))

	tests := []struct {
		name    string
		tamper  func(t *testing.T, dir string)
		signers []Signer
		file    string // the file the error names; "" when it verifies
		reason  string
		sshOK   bool // whether ssh-keygen -Y verify accepts SHA256SUMS
	}{
		{name: "the release as signed", sshOK: true},
		{
			name: "an archive changed after signing", file: "expiryctl_v1.2.0_linux_amd64.tar.gz", reason: "not the one released", sshOK: true,
			tamper: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "expiryctl_v1.2.0_linux_amd64.tar.gz"), "a backdoored binary")
			},
		},
		{
			name: "SHA256SUMS changed to match a changed archive", file: SumsFile, reason: "changed after it was signed",
			tamper: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "expiryctl_v1.2.0_linux_amd64.deb"), "a backdoored package")
				sums, _ := os.ReadFile(filepath.Join(dir, SumsFile))
				sum := sha256.Sum256([]byte("a backdoored package"))
				lines := strings.Split(string(sums), "\n")
				lines[1] = hex.EncodeToString(sum[:]) + "  expiryctl_v1.2.0_linux_amd64.deb"
				writeFile(t, filepath.Join(dir, SumsFile), strings.Join(lines, "\n"))
			},
		},
		{
			name: "signed again by a key the signers do not list", file: SignatureFile, reason: "a key the allowed signers do not list",
			tamper: func(t *testing.T, dir string) { sign(t, otherKey, dir) },
		},
		{
			name: "an archive SHA256SUMS does not list", file: "expiryctl_v1.2.0_linux_arm64.tar.gz", reason: "does not list it", sshOK: true,
			tamper: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "expiryctl_v1.2.0_linux_arm64.tar.gz"), "slipped in")
			},
		},
		{
			name: "no signature", file: SignatureFile, reason: "missing",
			tamper: func(t *testing.T, dir string) { _ = os.Remove(filepath.Join(dir, SignatureFile)) },
		},
		{
			name: "a key rotated out before now", file: SignatureFile, reason: "rotated out",
			signers: mustSigners(t, `release@expiryctl namespaces="expiryctl-release",valid-before="20261101Z" `+publicKey(t, releaseKey)),
		},
		{
			name: "a key allowed only in another namespace", file: SignatureFile, reason: "only in namespaces git",
			signers: mustSigners(t, `release@expiryctl namespaces="git" `+publicKey(t, releaseKey)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := releaseDir(t, releaseKey)
			if tt.tamper != nil {
				tt.tamper(t, dir)
			}
			use := signers
			if tt.signers != nil {
				use = tt.signers
			}
			rep, err := Verify(dir, use, now)
			var mismatch *MismatchError
			switch {
			case tt.file == "" && err != nil:
				t.Fatalf("Verify: %v, want it to verify", err)
			case tt.file == "" && (len(rep.Checked) != 3 || rep.Signer != "release@expiryctl"):
				t.Fatalf("report %+v, want 3 files checked, signed by release@expiryctl", rep)
			case tt.file != "" && !errors.As(err, &mismatch):
				t.Fatalf("Verify: %v, want a MismatchError naming %s", err, tt.file)
			case tt.file != "" && (mismatch.File != tt.file || !strings.Contains(mismatch.Reason, tt.reason)):
				t.Fatalf("Verify: %v, want it to name %s and say %q", err, tt.file, tt.reason)
			}
			// ssh-keygen alone reaches the same verdict on SHA256SUMS (the
			// archives' sums are sha256sum -c's to check).
			if tt.signers == nil && tt.name != "no signature" {
				if err := sshVerify(t, dir, signersPath, "release@expiryctl"); (err == nil) != tt.sshOK {
					t.Fatalf("ssh-keygen -Y verify: %v, want accepted=%v", err, tt.sshOK)
				}
			}
		})
	}
}

// TestVerifyReleaseDuringARotation: with the old key's valid-before after
// the new key's valid-after, a release signed by either verifies during
// the overlap, and by the old one no longer once it ends.
func TestVerifyReleaseDuringARotation(t *testing.T) {
	t.Parallel()
	keys := t.TempDir()
	oldKey, newKey := newKey(t, keys, "old"), newKey(t, keys, "new")
	_, signers := signersFile(t,
		`release@expiryctl namespaces="expiryctl-release",valid-before="20270201Z" `+publicKey(t, oldKey),
		`release@expiryctl namespaces="expiryctl-release",valid-after="20270101Z" `+publicKey(t, newKey))
	overlap := time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC)
	for _, key := range []string{oldKey, newKey} {
		if _, err := Verify(releaseDir(t, key), signers, overlap); err != nil {
			t.Errorf("signed by %s during the overlap: %v", filepath.Base(key), err)
		}
	}
	if _, err := Verify(releaseDir(t, oldKey), signers, overlap.AddDate(0, 1, 0)); err == nil || !strings.Contains(err.Error(), "rotated out") {
		t.Errorf("signed by the old key after the overlap: %v, want it refused as rotated out", err)
	}
	if _, err := Verify(releaseDir(t, newKey), signers, overlap.AddDate(0, -1, 0)); err == nil || !strings.Contains(err.Error(), "only from") {
		t.Errorf("signed by the new key before its valid-after: %v, want it refused", err)
	}
}

// TestParseSignersTakesAPublicKey: a bare .pub line is a signer too, and a
// file that is neither is a KeyFileError (a usage error, not tampering).
func TestParseSignersTakesAPublicKey(t *testing.T) {
	t.Parallel()
	key := newKey(t, t.TempDir(), "release")
	pub, _ := os.ReadFile(key + ".pub")
	signers, err := ParseSigners("release.pub", pub)
	if err != nil || len(signers) != 1 || len(signers[0].Namespaces) != 0 {
		t.Fatalf("ParseSigners(.pub) = %+v, %v", signers, err)
	}
	if _, err := Verify(releaseDir(t, key), signers, time.Now()); err != nil {
		t.Errorf("verified with the .pub: %v", err)
	}
	for _, bad := range []string{"", "# only a comment\n", "release@expiryctl ssh-rsa AAAAB3NzaC1yc2E\n", "release@expiryctl cert-authority " + publicKey(t, key) + "\n"} {
		var keyErr *KeyFileError
		if _, err := ParseSigners("allowed_signers", []byte(bad)); !errors.As(err, &keyErr) {
			t.Errorf("ParseSigners(%q) = %v, want a KeyFileError", bad, err)
		}
	}
}

func mustSigners(t *testing.T, lines ...string) []Signer {
	t.Helper()
	_, s := signersFile(t, lines...)
	return s
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
