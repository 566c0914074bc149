package replay_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/replay"
)

// TestAuditorReadsRequestsAsTheApproverSawThem: an auditor, in no other
// group, lists and shows requests, seeing the cohort the approver saw
// (letters, categories, states, sample, permanent letters), and reads no
// payload or headers of the archive.
func TestAuditorReadsRequestsAsTheApproverSawThem(t *testing.T) {
	t.Parallel()
	b := setupGovernance(t, 3)
	ctx := context.Background()
	req := b.request(t, "alice", b.letters...)
	audrey := b.db.Login(t, "audrey", "expiryctl_auditor")
	auditor := &replay.Service{Pool: audrey.Pool, Actor: "audrey"}

	seen, err := b.as("bob").Show(ctx, req.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := auditor.Show(ctx, req.ID, 0)
	if err != nil {
		t.Fatalf("the auditor cannot show a request: %v", err)
	}
	if got.CohortHash != seen.CohortHash || !reflect.DeepEqual(got.Sample, seen.Sample) ||
		!reflect.DeepEqual(got.Categories, seen.Categories) || !reflect.DeepEqual(got.States, seen.States) ||
		!reflect.DeepEqual(got.Changes, seen.Changes) || !reflect.DeepEqual(got.Permanent, seen.Permanent) {
		t.Fatalf("the auditor sees\n%+v\nwhere the approver saw\n%+v", got, seen)
	}
	list, err := auditor.List(ctx, "", 10)
	if err != nil || len(list) != 1 || list[0].ID != req.ID {
		t.Fatalf("the auditor lists %+v (%v), want request %d", list, err, req.ID)
	}
	for _, sql := range []string{
		`SELECT payload FROM expiryctl.dead_letters LIMIT 1`,
		`SELECT headers FROM expiryctl.dead_letters LIMIT 1`,
		`SELECT * FROM expiryctl.dead_letters LIMIT 1`,
	} {
		_, err := audrey.Pool.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("the auditor ran %s: %v, want it refused", sql, err)
		}
	}
}
