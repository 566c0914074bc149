package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReleaseIsReproducible runs scripts/release.sh (what `make release`
// runs) twice on this commit, for linux/amd64 alone to keep it short, and
// holds the two outputs to the same bytes: archive, .deb, .rpm, SBOM and
// SHA256SUMS (the signatures differ: each run signs with a throwaway key
// of its own). It then checks the release the way a user would: the
// archive's binary reports its build, `expiryctl version --verify-release`
// and `ssh-keygen -Y verify` accept the signature.
func TestReleaseIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release twice (about a minute with a warm build cache)")
	}
	t.Parallel()
	root := moduleRoot(t)
	first, second := t.TempDir(), t.TempDir()
	for _, dist := range []string{first, second} {
		script := exec.Command("bash", "scripts/release.sh")
		script.Dir = root
		script.Env = append(os.Environ(), "DIST="+dist, "PLATFORMS=linux/amd64", "EXPIRYCTL_RELEASE_KEY=")
		if out, err := script.CombinedOutput(); err != nil {
			t.Fatalf("scripts/release.sh: %v\n%s", err, out)
		}
	}

	names, _ := filepath.Glob(filepath.Join(first, "*"))
	var shipped []string
	for _, path := range names {
		name := filepath.Base(path)
		a, _ := os.ReadFile(path)
		b, err := os.ReadFile(filepath.Join(second, name))
		if err != nil {
			t.Fatalf("the second run wrote no %s", name)
		}
		switch name {
		case SignatureFile, "allowed_signers":
			continue // a throwaway key per run
		}
		shipped = append(shipped, name)
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs on one commit", name)
		}
	}
	for _, suffix := range []string{"_linux_amd64.tar.gz", "_linux_amd64.deb", "_linux_amd64.rpm", ".cdx.json"} {
		if !containsSuffix(shipped, suffix) {
			t.Errorf("the release has no *%s: %v", suffix, shipped)
		}
	}
	if _, err := os.Stat(filepath.Join(first, "UNSIGNED-SNAPSHOT")); err != nil {
		t.Errorf("a release signed with a throwaway key does not say so: %v", err)
	}

	commit, at, modified := gitHead(t, root)
	archives, _ := filepath.Glob(filepath.Join(first, "*_linux_amd64.tar.gz"))
	binary := unpackBinary(t, archives[0], at)
	out, err := exec.Command(binary, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("the archive's expiryctl version: %v", err)
	}
	var build Build
	if err := json.Unmarshal(out, &build); err != nil {
		t.Fatal(err)
	}
	version := strings.TrimPrefix(strings.TrimSuffix(filepath.Base(archives[0]), "_linux_amd64.tar.gz"), "expiryctl_")
	if build.Version != version || build.Commit != commit || build.BuildDate != at || build.Modified != modified || build.Go == "" {
		t.Errorf("the archive's binary reports %#v, want version %s, commit %s, build date %s, modified %v", build, version, commit, at, modified)
	}

	signers := filepath.Join(first, "allowed_signers")
	if out, err := exec.Command(binary, "version", "--verify-release", first, "--signers", signers).CombinedOutput(); err != nil {
		t.Errorf("expiryctl version --verify-release: %v\n%s", err, out)
	}
	if err := sshVerify(t, first, signers, "snapshot@expiryctl"); err != nil {
		t.Errorf("ssh-keygen -Y verify: %v", err)
	}
	// The other run's key signed the same bytes, and is not this one's.
	if out, err := exec.Command(binary, "version", "--verify-release", second, "--signers", signers).CombinedOutput(); err == nil || !strings.Contains(string(out), "SHA256SUMS.sig") {
		t.Errorf("verified the second run's signature with the first run's key: %v\n%s", err, out)
	}
}

// unpackBinary writes the archive's expiryctl to a temporary file, holding
// every entry to owner 0:0 and the commit's time.
func unpackBinary(t *testing.T, archive, commitTime string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if !gz.ModTime.IsZero() || gz.Name != "" {
		t.Errorf("the gzip header carries a time (%v) or a name (%q)", gz.ModTime, gz.Name)
	}
	want, _ := time.Parse(time.RFC3339, commitTime)
	tr := tar.NewReader(gz)
	binary := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || !h.ModTime.Equal(want) {
			t.Errorf("%s: owner %d:%d %q, time %v; want 0:0, no names, %v", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime, want)
		}
		if filepath.Base(h.Name) == "expiryctl" && h.Typeflag == tar.TypeReg {
			binary = filepath.Join(t.TempDir(), "expiryctl")
			out, err := os.OpenFile(binary, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				t.Fatal(err)
			}
			out.Close()
		}
	}
	if binary == "" {
		t.Fatalf("%s holds no expiryctl", archive)
	}
	return binary
}

func containsSuffix(names []string, suffix string) bool {
	for _, n := range names {
		if strings.HasSuffix(n, suffix) {
			return true
		}
	}
	return false
}
