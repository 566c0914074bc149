package store_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sumFile pins the sha256 of every released migration; its comment says
// why, and what the history of the pinned files is.
const sumFile = "migrations.sum"

// TestMigrationChecksums holds every released migration to the content it
// was released with: goose never runs a version twice, so an edit would
// reach new databases only and leave every existing one on the old form.
// With -update it pins migrations that are not pinned yet, and never
// rewrites a pinned line.
func TestMigrationChecksums(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(sumFile)
	if err != nil {
		t.Fatal(err)
	}
	pins, err := parsePins(raw)
	if err != nil {
		t.Fatalf("%s: %v", sumFile, err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}

	pinned := map[string]bool{}
	var newestPinned int64
	for _, p := range pins {
		pinned[p.path] = true
		newestPinned = max(newestPinned, p.version)
		content, err := os.ReadFile(p.path)
		if os.IsNotExist(err) {
			t.Errorf("migration %05d (%s) is pinned in %s and gone: a released migration is never renamed or removed, "+
				"since databases have its version recorded", p.version, p.path, sumFile)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256Hex(content); sum != p.sum {
			t.Errorf("migration %05d was edited after release (%s: sha256 %s, pinned %s): a shipped migration is never edited, "+
				"databases that ran it keep its old form; write a new one and revert %s. "+
				"(Only if this migration never left your branch: delete its line from %s and run %s again.)",
				p.version, p.path, sum, p.sum, p.path, sumFile, regenerate)
		}
	}

	var lines []string
	for _, path := range files {
		if pinned[path] {
			continue
		}
		version, err := migrationVersion(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if version <= newestPinned {
			t.Errorf("migration %s is not pinned and no newer than the released %05d: goose would not apply it to a database "+
				"already at %05d; number it after the newest pinned migration", path, newestPinned, newestPinned)
			continue
		}
		content, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !*update {
			t.Errorf("migration %s is not pinned in %s: pin it with %s and commit the line with the migration", path, sumFile, regenerate)
			continue
		}
		lines = append(lines, sha256Hex(content)+"  "+path+"\n")
	}
	if len(lines) == 0 || t.Failed() {
		return
	}
	if !bytes.HasSuffix(raw, []byte("\n")) {
		raw = append(raw, '\n')
	}
	if err := os.WriteFile(sumFile, append(raw, strings.Join(lines, "")...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// pin is one line of migrations.sum.
type pin struct {
	sum, path string
	version   int64
}

// parsePins reads migrations.sum: sha256sum lines ("HASH  PATH"), blank
// lines and # comments, the versions strictly increasing.
func parsePins(raw []byte) ([]pin, error) {
	var pins []pin
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sum, path, ok := strings.Cut(line, "  ")
		if _, err := hex.DecodeString(sum); !ok || err != nil || len(sum) != 2*sha256.Size {
			return nil, fmt.Errorf("line %d: want \"SHA256  migrations/NNNNN_name.sql\", have %q", n, line)
		}
		version, err := migrationVersion(path)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(pins) > 0 && version <= pins[len(pins)-1].version {
			return nil, fmt.Errorf("line %d: version %05d after %05d: the lines go oldest first, one per version", n, version, pins[len(pins)-1].version)
		}
		pins = append(pins, pin{sum: sum, path: path, version: version})
	}
	return pins, sc.Err()
}

// migrationVersion is the version goose reads from a migration's file name.
func migrationVersion(path string) (int64, error) {
	name := filepath.Base(path)
	digits, _, ok := strings.Cut(name, "_")
	version, err := strconv.ParseInt(digits, 10, 64)
	if !ok || err != nil || !strings.HasPrefix(path, "migrations/") || !strings.HasSuffix(name, ".sql") {
		return 0, fmt.Errorf("%q is not a migration (migrations/NNNNN_name.sql)", path)
	}
	return version, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
