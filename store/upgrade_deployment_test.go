package store_test

import (
	"context"
	"crypto/sha256"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// A database of today's schema, on the unnamed groups, moves to its
// deployment's name with its data and the people its trail granted; the
// unnamed groups, which other deployments on the cluster share, keep
// nothing of it.
func TestMigrateMovesAnUnnamedDeploymentToItsName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	d := pgtest.DeploymentName("up")
	// The DBA's part: the deployment's groups, administered by the owner.
	// The groups hold privileges in this database alone, which DROP OWNED
	// takes before they go.
	t.Cleanup(func() {
		ctx := context.Background()
		for _, g := range d.Groups() {
			_, _ = db.Pool.Exec(ctx, "DROP OWNED BY "+g)
			if _, err := db.Pool.Exec(ctx, "DROP ROLE IF EXISTS "+g); err != nil {
				t.Errorf("drop %s: %v", g, err)
			}
		}
	})
	ivan := db.GrantedLogin(t, "ivan", access.Ingester)
	alice := db.GrantedLogin(t, "alice", access.Operator)
	// carl was granted by hand, as a member of another deployment sharing
	// the unnamed groups would be: the trail does not account for him.
	carl := db.Login(t, "carl", access.Approver, access.Operator)
	body := []byte(`{"reservation_id":"r-1","expected_version":1,"idempotency_key":"expire:r-1:v1"}`)
	if _, err := deadletter.InsertAs(ctx, ivan.Pool, "", "q.dlq", []deadletter.Letter{{Fingerprint: sha256.Sum256(body),
		JobKey: "expire:r-1:v1", ReservationID: "r-1", IdempotencyKey: "expire:r-1:v1", SourceQueue: "q.dlq",
		OriginalExchange: "reservations", OriginalRoutingKey: "reservation.expire", Category: deadletter.TransientExhausted,
		Headers: []byte(`{}`), Payload: body, DeadLetteredAt: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := access.Bootstrap(ctx, db.Pool, pgtest.Owner, d, nil); err != nil {
		t.Fatal(err)
	}
	// An application's table the policy's queries read, granted to the
	// unnamed operators: its owner, not migrate, grants it anew.
	for _, s := range []string{`CREATE SCHEMA app`, `CREATE TABLE app.reservations (id text)`,
		`GRANT USAGE ON SCHEMA app TO expiryctl_operator`, `GRANT SELECT ON app.reservations TO expiryctl_operator`} {
		if _, err := db.Pool.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}

	owner := db.OwnerPool(t)
	res, err := store.MigrateDeployment(ctx, owner, d)
	if err != nil {
		t.Fatal(err)
	}
	mv := res.Moved
	if mv == nil || mv.Privileges == 0 {
		t.Fatalf("the move: %+v, want privileges moved", mv)
	}
	wantMoved := map[string][]string{ivan.Name: {d.MustGroup("ingester")}, alice.Name: {d.MustGroup("operator")}}
	if len(mv.Members) != len(wantMoved) {
		t.Errorf("moved %+v, want %v", mv.Members, wantMoved)
	}
	for _, m := range mv.Members {
		if !slices.Equal(m.Groups, wantMoved[m.Login]) {
			t.Errorf("moved %s to %v, want %v", m.Login, m.Groups, wantMoved[m.Login])
		}
	}
	if i := slices.IndexFunc(mv.NotMoved, func(m store.GroupMembers) bool { return m.Login == carl.Name }); i < 0 {
		t.Errorf("not moved %+v, want %s named", mv.NotMoved, carl.Name)
	}
	wantElsewhere := "GRANT SELECT ON TABLE app.reservations TO " + pgx.Identifier{d.MustGroup("operator")}.Sanitize()
	if !slices.Contains(mv.Elsewhere, wantElsewhere) {
		t.Errorf("elsewhere %v, want %q", mv.Elsewhere, wantElsewhere)
	}
	// The database belongs to the DBA, who closes it as migrate says.
	if !slices.ContainsFunc(res.Access.Pending, func(s string) bool {
		return strings.HasPrefix(s, "REVOKE") && strings.Contains(s, access.Operator)
	}) {
		t.Errorf("pending %v, want the unnamed groups' CONNECT revoked", res.Access.Pending)
	}
	for _, s := range res.Access.Pending {
		if _, err := db.Pool.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}

	if got, err := store.ReadDeployment(ctx, db.Pool); err != nil || got != d {
		t.Fatalf("the schema serves %q (%v), want %s", got, err, d)
	}
	if err := store.CheckSchema(ctx, owner); err != nil {
		t.Fatalf("CheckSchema after the move: %v", err)
	}
	// Its data is there, and alice, moved, reads it on a new session.
	alicePool := pgtest.Connect(t, alice.URL)
	var n int
	if err := alicePool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("alice after the move: %d letters, %v", n, err)
	}
	// carl keeps the unnamed groups, which give nothing here any more.
	if _, err := pgx.Connect(ctx, carl.URL); err == nil {
		t.Errorf("carl, in the unnamed groups only, still connects")
	}
	var holders []string
	rows, err := db.Pool.Query(ctx, `SELECT g FROM unnest($1::text[]) g WHERE has_schema_privilege(g, 'expiryctl', 'USAGE')
		OR EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = 'expiryctl'::regnamespace AND has_function_privilege(g, p.oid, 'EXECUTE'))
		OR EXISTS (SELECT 1 FROM pg_class c WHERE c.relnamespace = 'expiryctl'::regnamespace AND has_table_privilege(g, c.oid, 'SELECT'))`, store.Groups)
	if err != nil {
		t.Fatal(err)
	}
	if holders, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(holders) > 0 {
		t.Errorf("the unnamed groups %v still hold privileges in the schema", holders)
	}
	// The unnamed groups' grant outside the schema is still theirs: a
	// second migrate moves nothing, and grants nobody again.
	again, err := store.Migrate(ctx, owner)
	if err != nil || again.Moved != nil || again.Deployment != d {
		t.Errorf("a second migrate: %+v, %v; want nothing moved", again.Moved, err)
	}
	// Each move is audited, once, so reconcile finds the memberships
	// explained.
	var moves int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'access.grant'
		AND details->'groups' ?| $1`, d.Groups()).Scan(&moves); err != nil || moves != 2 {
		t.Errorf("%d access.grant rows name the deployment's groups (%v), want 2", moves, err)
	}
}
