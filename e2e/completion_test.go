package e2e_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestCompletionOffersIDs: a tab after `dlq show` offers the newest waiting
// letters, after `replay approve` the pending requests, with what each is,
// rather than file names; and a tab is not an action, so it writes no audit
// row.
func TestCompletionOffersIDs(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	tuiSeed(t, db, 30)
	alice := newCLI(db.Login(t, "alice", "expiryctl_operator").URL, "alice")
	req := alice.ok(t, "replay", "request", "--id", "3", "--id", "4", "--why", "INC-7 completion", "-o", "json")
	var created struct{ ID int64 }
	if err := json.Unmarshal([]byte(req.stdout), &created); err != nil || created.ID == 0 {
		t.Fatalf("request: %s (%v)", req, err)
	}
	id := created.ID
	before := count(t, db.Pool, `SELECT count(*) FROM expiryctl.audit_log`)

	letters := alice.ok(t, "__complete", "dlq", "show", "")
	lines := strings.Split(strings.TrimSpace(letters.stdout), "\n")
	// 31 letters seeded, the newest last; 3 and 4 are held by the request.
	if len(lines) != 26 || !strings.HasPrefix(lines[0], "31\t") || !strings.Contains(lines[1], "transient-exhausted db_timeout") {
		t.Errorf("dlq show completions:\n%s", letters.stdout)
	}
	if want := ":36"; lines[len(lines)-1] != want {
		t.Errorf("directive %q, want %q (no file names, keep the order)", lines[len(lines)-1], want)
	}

	requests := alice.ok(t, "__complete", "replay", "approve", "")
	if !strings.HasPrefix(requests.stdout, strconv.FormatInt(id, 10)+"\tpending replay of 2 letters, by ") ||
		!strings.Contains(requests.stdout, "INC-7 completion") {
		t.Errorf("replay approve completions:\n%s", requests.stdout)
	}
	running := alice.ok(t, "__complete", "replay", "run", "")
	if strings.HasPrefix(running.stdout, strconv.FormatInt(id, 10)+"\t") {
		t.Errorf("replay run offers the pending request %d:\n%s", id, running.stdout)
	}
	if after := count(t, db.Pool, `SELECT count(*) FROM expiryctl.audit_log`); after != before {
		t.Errorf("completions wrote %d audit rows", after-before)
	}
}
