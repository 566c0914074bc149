package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/store"
)

// TestRedTeamHandlerUnseenIsRefusedAtRequest: the handler check reads who
// consumes a replay's targets, and SQS and the job stores whose workers
// take jobs without registering (River, a jobs table, pg-boss) show
// nobody. alice, an operator with raw SQL, requests a replay of such
// letters without vouching for the handler: the database refuses it when
// it is made (rule handler-unseen), in the system's own words, rather than
// letting bob approve a run that could never start. With a reason the
// request is made, and the reason frozen; a BullMQ or RabbitMQ cohort,
// whose consumers the check can read, needs none, and neither does a
// discard. The words are the archive's, written by the owner's migrate
// from the release's drivers: the migrations' seed says what the drivers
// say, so that migrate changes no system's row.
func TestRedTeamHandlerUnseenIsRefusedAtRequest(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()

	// The owner migrates as `expiryctl migrate` does: the release's
	// drivers register their systems, pg-boss, which no migration seeds,
	// among them.
	res, err := store.MigrateDeployment(ctx, rt.owner, "", registry.QueueSystems()...)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Systems.Added, []string{"pgboss"}) || len(res.Systems.Changed) != 0 {
		t.Errorf("the release's migrate added %v and changed %v, want pgboss added and nothing changed: the seeds of 00042 and 00043 say what the drivers say",
			res.Systems.Added, res.Systems.Changed)
	}

	const workARN = "arn:aws:sqs:us-east-1:100010001000:reservation-expiry"
	create := `SELECT request_id FROM expiryctl.replay_request_create('', $2, $1::jsonb, NULL, 0, '', $3, 'INC-11',
		false, false, $4, $5, false, false, NULL, false, 'the red team captures nothing')`
	for _, c := range []struct {
		system, queue, target string
		unseen                bool
	}{
		{"river", "river://jobs/expiry", "", true},
		{"sqs", "arn:aws:sqs:us-east-1:100010001000:reservation-expiry-dlq", workARN, true},
		{"jobtable", "jobtable://jobs/public.expiry_jobs", "", true},
		{"pgboss", "pgboss://boss/expiry", "", true},
		{"bullmq", "bullmq://redis/bull/expiry", "", true},
		{"rabbitmq", "", "", false},
	} {
		var id int64
		if c.system == "rabbitmq" {
			id = rt.letters[0]
		} else if id, err = ingestOne(ctx, rt.ivan.Pool, c.system, c.queue, ""); err != nil {
			t.Fatalf("the ingester cannot capture a %s letter: %v", c.system, err)
		}
		ids := fmt.Sprintf(`{"ids": [%d]}`, id)
		s, known, err := store.QueueSystemNamed(ctx, rt.alice.Pool, c.system)
		if err != nil || !known || (s.ConsumersUnseen != "") != c.unseen {
			t.Fatalf("the archive describes %s as %+v (%v, %v), want words of why it shows no consumers: %v", c.system, s, known, err, c.unseen)
		}
		if d, ok := registry.Of(deadletter.System(c.system)); !ok || s.ConsumersUnseen != d.Words().ConsumersUnseen {
			t.Errorf("%s: the archive says %q of its consumers, unlike its driver (found: %v)", c.system, s.ConsumersUnseen, ok)
		}

		if !c.unseen {
			var request int64
			if err := rt.alice.Pool.QueryRow(ctx, create, ids, "replay", c.target, false, nil).Scan(&request); err != nil {
				t.Errorf("a replay of a %s letter, whose consumers the check reads, without --same-handler-ok: %v", c.system, err)
			}
			continue
		}
		_, err = rt.alice.Pool.Exec(ctx, create, ids, "replay", c.target, false, nil)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != store.RefusalSQLState || pgErr.Detail != "rule: handler-unseen" {
			t.Errorf("a replay of a %s letter without --same-handler-ok: %v, want refused by handler-unseen", c.system, err)
		} else if want := s.ConsumersUnseen + ", so nothing can tell whether a consumer runs a fixed handler"; !strings.HasPrefix(pgErr.Message, want) ||
			!strings.Contains(pgErr.Message, `--same-handler-ok "why"`) {
			t.Errorf("%s: refused with %q, want the system's words (%q) and what to do", c.system, pgErr.Message, want)
		}
		// The flag without a reason is no reason; the request is refused
		// as it was before there was this rule.
		refused(t, rt.alice.Pool, "same-handler", create, ids, "replay", c.target, true, " ")
		// A discard publishes nothing, so no handler takes the letter.
		var discard int64
		if err := rt.alice.Pool.QueryRow(ctx, `SELECT request_id FROM expiryctl.replay_request_create('', 'discard', $1::jsonb, NULL, 0, '', '', 'INC-11',
			false, false)`, ids).Scan(&discard); err != nil {
			t.Errorf("a discard of a %s letter: %v", c.system, err)
		} else if _, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_cancel('', $1, 'the red team discards nothing')`, discard); err != nil {
			t.Fatalf("cancel the discard of the %s letter: %v", c.system, err)
		}

		why := "the fix is deployed to every worker of " + c.system
		var request int64
		if err := rt.alice.Pool.QueryRow(ctx, create, ids, "replay", c.target, true, why).Scan(&request); err != nil {
			t.Errorf("a replay of a %s letter with --same-handler-ok %q: %v", c.system, why, err)
			continue
		}
		var frozen string
		if err := rt.bob.Pool.QueryRow(ctx, `SELECT same_handler_why FROM expiryctl.replay_requests WHERE id = $1 AND same_handler_ok`, request).Scan(&frozen); err != nil || frozen != why {
			t.Errorf("request %d of %s letters shows bob the reason %q (%v), want %q", request, c.system, frozen, err, why)
		}
	}
}
