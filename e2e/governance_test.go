package e2e_test

import (
	"context"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestGovernanceAsPeople runs the binary as people with their own logins:
// the rules hold whatever --actor says, refusals name the rule and exit 4,
// and only a superuser's or the owner's connection is told governance is
// advisory for it.
func TestGovernanceAsPeople(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	alice := db.Login(t, "alice", "expiryctl_operator", "expiryctl_approver")
	bob := db.Login(t, "bob", "expiryctl_approver")
	dave := db.Login(t, "dave", "expiryctl_admin")
	erin := db.Login(t, "erin", "expiryctl_admin")
	body := []byte(`{"reservation_id":"r-1","expected_version":1,"idempotency_key":"expire:r-1:v1"}`)
	letters := []deadletter.Letter{{Fingerprint: sha256.Sum256(body), JobKey: "expire:r-1:v1", ReservationID: "r-1",
		SourceQueue: "q.dlq", OriginalExchange: "reservations", OriginalRoutingKey: "reservation.expire",
		Category: deadletter.TransientExhausted, Headers: []byte(`{}`), Payload: body,
		DeadLetteredAt: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}}
	if _, err := deadletter.Insert(context.Background(), db.Pool, letters); err != nil {
		t.Fatal(err)
	}

	super := newCLI(db.URL, "")
	if r := super.ok(t, "policy", "show"); r.advisory {
		t.Errorf("a read was told governance is advisory, which binds only what it governs: %s", r)
	}
	if r := super.exits(t, 3, "replay", "cancel", "999", "--why", "none such"); !r.advisory {
		t.Errorf("a superuser's connection was not told governance is advisory: %s", r)
	}
	owner := newCLI(pgtest.WithUser(db.URL, pgtest.Owner), "")
	if r := owner.ok(t, "access", "grant", alice.Name, "expiryctl_auditor"); !r.advisory {
		t.Errorf("the owner's connection was not told governance is advisory: %s", r)
	}
	list := owner.ok(t, "access", "list", "-o", "json")
	if !strings.Contains(list.stdout, alice.Name) || !strings.Contains(list.stdout, "expiryctl_auditor") {
		t.Errorf("access list does not show the grant:\n%s", list.stdout)
	}

	asAlice := newCLI(alice.URL, "")
	r := asAlice.ok(t, "replay", "request", "--id", "1", "--why", "INC-9")
	if r.advisory {
		t.Errorf("a person's login was told governance is advisory: %s", r)
	}
	// Alice approves her own request, labelled as bob: four-eyes compares logins.
	r = newCLI(alice.URL, "bob").exits(t, 4, "replay", "approve", "1", "--why", "looks fine")
	if !strings.Contains(r.stderr, "four-eyes") {
		t.Errorf("self-approval under another label: %s", r)
	}
	// Bob approves a hash he was not shown.
	r = newCLI(bob.URL, "").exits(t, 4, "replay", "approve", "1", "--cohort-hash", strings.Repeat("ab", 32))
	if !strings.Contains(r.stderr, "cohort-hash") {
		t.Errorf("approval of another hash: %s", r)
	}
	r = newCLI(bob.URL, "").ok(t, "replay", "approve", "1", "--why", "checked")
	if !strings.Contains(r.stderr, "cohort hash") {
		t.Errorf("approve did not say which cohort hash it approved: %s", r)
	}
	// A CREATEROLE login and a pg_write_all_data member are told, as the
	// owner is, that the rules bind them only as far as they choose.
	// (store's TestEveryBypassRoleIsNamed holds what the line says.)
	for grant, named := range map[string]string{"ALTER ROLE %s CREATEROLE": "CREATEROLE", "GRANT pg_write_all_data TO %s": "pg_write_all_data"} {
		l := db.Login(t, "keyholder", "expiryctl_auditor")
		if _, err := db.Pool.Exec(context.Background(), strings.ReplaceAll(grant, "%s", pgx.Identifier{l.Name}.Sanitize())); err != nil {
			t.Fatal(err)
		}
		if r := newCLI(l.URL, "").run(t, "replay", "cancel", "999", "--why", "none such"); !r.advisory {
			t.Errorf("a login holding %s was not told governance is advisory for it: %s", named, r)
		}
	}
	// An auditor reads the request as the approver saw it, payloads aside.
	audrey := db.Login(t, "audrey", "expiryctl_auditor")
	shown := newCLI(audrey.URL, "").ok(t, "replay", "show", "1")
	if !strings.Contains(shown.stdout, "r-1") || !strings.Contains(shown.stdout, "cohort") {
		t.Errorf("replay show as an auditor:\n%s", shown)
	}
	if listed := newCLI(audrey.URL, "").ok(t, "replay", "list", "-o", "json"); !strings.Contains(listed.stdout, `"id": 1`) && !strings.Contains(listed.stdout, `"id":1`) {
		t.Errorf("replay list as an auditor:\n%s", listed)
	}
	// Bob is no operator and no admin.
	if r := newCLI(bob.URL, "").exits(t, 4, "policy", "set", "max_rate=1"); !strings.Contains(r.stderr, "role") {
		t.Errorf("an approver set the policy: %s", r)
	}
	if r := newCLI(bob.URL, "").exits(t, 4, "access", "grant", bob.Name, "expiryctl_admin"); !strings.Contains(r.stderr, "role") {
		t.Errorf("an approver managed access: %s", r)
	}

	// Policy under four-eyes: dave proposes, dave cannot approve it, erin can.
	r = newCLI(dave.URL, "").ok(t, "policy", "set", "max_rate=7", "--why", "slower")
	if !strings.Contains(r.stdout, "policy change 1 proposed") {
		t.Fatalf("policy set by an admin: %s", r)
	}
	if r := newCLI(dave.URL, "erin").exits(t, 4, "policy", "approve", "1"); !strings.Contains(r.stderr, "four-eyes") {
		t.Errorf("an admin approved her own change: %s", r)
	}
	if r := newCLI(dave.URL, "").ok(t, "policy", "show"); !strings.Contains(r.stdout, "max_rate=7") {
		t.Errorf("policy show does not list the pending change:\n%s", r.stdout)
	}
	newCLI(erin.URL, "").ok(t, "policy", "approve", "1", "--why", "agreed")
	if r := newCLI(dave.URL, "").ok(t, "policy", "show", "-o", "json"); !strings.Contains(r.stdout, `"max_rate": 7`) {
		t.Errorf("the approved change did not apply:\n%s", r.stdout)
	}
	var rows int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM expiryctl.audit_log
		WHERE action IN ('policy.propose', 'policy.approve', 'access.grant') AND outcome = 'ok'`).Scan(&rows); err != nil || rows != 3 {
		t.Errorf("%d ok rows of propose, approve and grant (%v), want 3", rows, err)
	}
}
