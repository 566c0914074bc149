package store_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// grandfathered are the numbered migrations that, when this check began,
// differed from the commit that first added them or were not pinned in it:
// 00001-00011 came before migrations.sum or were pinned later, and 00001-
// 00004 and 00013 were edited after they were first committed (what the
// edits changed, and how later migrations bring every form to one schema,
// is in migrations.sum's comment). Each is accepted once, by name and by
// the sha256 it has had since; nothing may join this list.
var grandfathered = map[string]string{
	"00001_dead_letters_and_audit.sql":                 "edf2fb3a3c8537cf081115fd44457ae90e84da3691bcb9a075de5f8c97574f86",
	"00002_audit_chain_and_policy.sql":                 "8960164fb617cb90583f4ef7586cc65c17d0a9a00f15d09b325199465599d577",
	"00003_replay.sql":                                 "e054b10354308c6f782c953ea2906c58a311f3ce82063d618c8b27cca2773be5",
	"00004_audit_chain_by_defaults.sql":                "f9c0c9e9fb8bb3bc744a833401c0bd950487325f1763d61dbc1d120fff0cb089",
	"00005_replay_run_triggers.sql":                    "46f4589130c3e37a3ba9d3784648b7f633d2d680c4073c4507f6b78f033c7830",
	"00006_replay_end_frees_open_items.sql":            "a9c9a7860a8adb99c629a9835803533b8903e56c5a35a79da54e3d40c4a4bf00",
	"00007_converge_early_replay_schema.sql":           "7dba435d67682cf2e135fdcb3ee253c87a210e80d0edc74685db92084d40411a",
	"00008_governance_roles_and_api.sql":               "78689f14a587ddbcb2853878c3dbac38dc95adcef0bbd8f75edbcad7282f76a5",
	"00009_governance_repairs.sql":                     "986a541fffd43d91873127b24f99f97f40b9e3206ef991b2eb2772f406a17cf9",
	"00010_letter_properties.sql":                      "be6c773a8c4910f8da84b3e667f80682269d15ff4f3ed268e76a301a4364904b",
	"00011_audit_tree_and_checkpoints.sql":             "2f3e5677b308e8b8128b83facb4c7dfe4e3d12bb8d9fcb89001feedc03d66ed1",
	"00013_handler_versions_and_permanent_letters.sql": "7fdbcee757750ca782e28e44f4928364382dfb97252f7188a4984a5fb227c309",
}

// TestMigrationsAreAsFirstCommitted holds "released means pushed" to the
// repository's history: every numbered migration is byte for byte the file
// that the commit which first added it holds, and that commit pins it in
// migrations.sum with that sha256. There is no "not released yet": a
// commit that lands is on main, and a database may have run it. A
// migration not committed yet only has to be pinned (TestMigrationChecksums).
// The definition files of functions/ are exempt by design: they are the
// one source of each function, and a change edits them.
//
// It reads the history with git, so it needs a clone with it; under CI a
// shallow clone or a missing git fails the test rather than skipping it.
func TestMigrationsAreAsFirstCommitted(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	firsts := firstCommits(t, root)
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("found %d migrations; the check looked in the wrong place", len(files))
	}
	for _, file := range files {
		name := filepath.Base(file)
		content, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256Hex(content)
		if want, ok := grandfathered[name]; ok {
			if sum != want {
				t.Errorf("migration %s was edited (sha256 %s, grandfathered at %s): a released migration is never edited; "+
					"put the change in a new migration and restore this file with `git checkout`", name, sum, want)
			}
			continue
		}
		first, ok := firsts[name]
		if !ok {
			continue // not committed yet: TestMigrationChecksums holds it to its pin
		}
		committed := gitOutput(t, root, "show", first.commit+":"+first.path)
		if !bytes.Equal(committed, content) {
			t.Errorf("migration %s differs from the commit that first added it (%s, sha256 %s, now %s): "+
				"a pushed migration is never edited, since databases that ran it keep that form; "+
				"restore it with `git show %s:%s > %s` and put the change in a new migration",
				name, short(first.commit), sha256Hex(committed), sum, short(first.commit), first.path, file)
			continue
		}
		sumFile := path.Join(path.Dir(path.Dir(first.path)), "migrations.sum")
		pinned := pinAt(t, root, first.commit, sumFile, name)
		if pinned != sum {
			t.Errorf("migration %s was not pinned in the commit that added it (%s: %s holds %q for it, want %s): "+
				"a migration and its line in migrations.sum are committed together (`make schema` writes the line)",
				name, short(first.commit), sumFile, pinned, sum)
		}
	}
}

// firstAdd is where a migration first came into the history.
type firstAdd struct{ commit, path string }

// firstCommits maps each migration's file name to the oldest commit that
// added a file of that name to a store's migrations folder, whatever the
// folder was called then (it moved from store/ to internal/adapter/store
// and back).
func firstCommits(t *testing.T, root string) map[string]firstAdd {
	t.Helper()
	if shallow := strings.TrimSpace(string(gitOutput(t, root, "rev-parse", "--is-shallow-repository"))); shallow != "false" {
		historyMissing(t, "the clone is shallow (git rev-parse --is-shallow-repository: "+shallow+"): fetch its history with `git fetch --unshallow`")
	}
	out := gitOutput(t, root, "log", "--reverse", "--no-renames", "--diff-filter=A", "--format=commit %H", "--name-only",
		"--", ":(glob)**/store/migrations/*.sql")
	firsts := map[string]firstAdd{}
	var commit string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if c, ok := strings.CutPrefix(line, "commit "); ok {
			commit = c
			continue
		}
		if line == "" {
			continue
		}
		if name := path.Base(line); firsts[name].commit == "" {
			firsts[name] = firstAdd{commit: commit, path: line}
		}
	}
	if len(firsts) == 0 {
		historyMissing(t, "git log finds no commit that added a migration")
	}
	return firsts
}

// pinAt is the sha256 that migrations.sum at commit pins for name, "" when
// it has no line for it or did not exist.
func pinAt(t *testing.T, root, commit, sumFile, name string) string {
	t.Helper()
	cmd := exec.Command("git", "-C", root, "show", commit+":"+sumFile)
	raw, err := cmd.Output()
	if err != nil {
		return ""
	}
	pins, err := parsePins(raw)
	if err != nil {
		t.Fatalf("%s at %s: %v", sumFile, short(commit), err)
	}
	for _, p := range pins {
		if filepath.Base(p.path) == name {
			return p.sum
		}
	}
	return ""
}

func gitOutput(t *testing.T, root string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		historyMissing(t, "git "+strings.Join(args, " ")+": "+err.Error()+": "+strings.TrimSpace(stderr.String()))
	}
	return out
}

// historyMissing stops the test when the repository's history cannot be
// read: a failure under CI, whose clone must have it, and a skip for a
// source tree without git.
func historyMissing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("cannot read the migrations' history: %s", why)
	}
	t.Skipf("cannot read the migrations' history (%s); CI, which runs this on a clone with its history, fails instead", why)
}

func short(commit string) string { return commit[:min(len(commit), 10)] }
