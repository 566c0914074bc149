package replay_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

func auditRows(t *testing.T, pool *pgxpool.Pool, action string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM expiryctl.audit_log WHERE action = $1`, action).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUnauditedReads holds what a watch's redraws rely on: the unaudited
// reads answer what Show and List answer, and write no replay.show or
// replay.list row, for a failure neither.
func TestUnauditedReads(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 3)
	ctx := context.Background()
	req := b.request(t, "alice", b.letters[0], b.letters[1])
	svc := b.as("alice")
	reads := svc.Unaudited()

	audited, err := svc.Show(ctx, req.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	unaudited, err := reads.Show(ctx, req.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(audited, unaudited) {
		t.Errorf("unaudited Show = %+v, want %+v", unaudited, audited)
	}
	listed, err := svc.List(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	unlisted, err := reads.List(ctx, "", 10)
	if err != nil || !reflect.DeepEqual(listed, unlisted) {
		t.Errorf("unaudited List = %+v (%v), want %+v", unlisted, err, listed)
	}
	if _, err := reads.Show(ctx, req.ID+100, 0); !errors.Is(err, deadletter.ErrNotFound) {
		t.Errorf("unaudited Show of a missing request: %v", err)
	}
	if n := auditRows(t, b.pool, "replay.show"); n != 1 {
		t.Errorf("%d replay.show rows, want 1 (the audited Show)", n)
	}
	if n := auditRows(t, b.pool, "replay.list"); n != 1 {
		t.Errorf("%d replay.list rows, want 1 (the audited List)", n)
	}
}

// TestUnauditedListExpiresStaleRequests: a redraw must not show a request
// as pending once its window has passed; expiring it is a change of state,
// audited as one.
func TestUnauditedListExpiresStaleRequests(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 3)
	ctx := context.Background()
	if _, err := replay.SetPolicy(ctx, b.pool, "admin", map[string]any{"approval_ttl": mustInterval(t, "20ms")}); err != nil {
		t.Fatal(err)
	}
	req := b.request(t, "alice", b.letters[0])
	time.Sleep(50 * time.Millisecond)
	listed, err := b.as("alice").Unaudited().List(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].ID != req.ID || listed[0].Status != replay.StatusExpired {
		t.Fatalf("listed %+v, want request %d expired", listed, req.ID)
	}
	if n := auditRows(t, b.pool, "replay.expire"); n != 1 {
		t.Errorf("%d replay.expire rows, want 1", n)
	}
	if n := auditRows(t, b.pool, "replay.list"); n != 0 {
		t.Errorf("%d replay.list rows, want none", n)
	}
}
