package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/sim/worker"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// outcomeWindow is how long the demo's replayed reservations have to reach
// their terminal state: the reference worker takes a job in milliseconds.
const outcomeWindow = "1m"

// watchOutcomes points the policy's outcome query at the reference model
// (worker.OutcomeQuery), so that the demo's `replay run` watches each
// replayed reservation reach its terminal state, and lets operators read
// the two tables it reads (the run asks as its operator's login). Run as
// the schema's owner, as `make demo` does, the change applies at once,
// audited; anyone else's is a proposal, or refused, and the demo says so
// and goes on.
func watchOutcomes(ctx context.Context, pool *pgxpool.Pool, out *progress) error {
	d, err := store.ReadDeployment(ctx, pool)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	operator := pgx.Identifier{d.MustGroup("operator")}.Sanitize()
	for _, grant := range []string{
		"GRANT USAGE ON SCHEMA reservations TO " + operator,
		"GRANT SELECT ON reservations.reservations, reservations.processed_jobs TO " + operator,
	} {
		if _, err := pool.Exec(ctx, grant); err != nil {
			return fmt.Errorf("demo: let operators read the reservations for the outcome query: %w", err)
		}
	}
	pol, err := replay.LoadPolicy(ctx, pool)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if pol.OutcomeQuery == worker.OutcomeQuery {
		return nil
	}
	changes, err := replay.ParsePolicyChanges([]string{"outcome_query=" + worker.OutcomeQuery, "outcome_window=" + outcomeWindow})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	res, err := replay.SetPolicyWhy(ctx, pool, "demo", changes, "demo: watch the reference worker's reservations reach their terminal state")
	var refusal *replay.Refusal
	switch {
	case errors.As(err, &refusal):
		out.printf("the policy's outcome query is not set (%s): replays of this demo will not watch outcomes", refusal.Message)
		return nil
	case err != nil:
		return fmt.Errorf("demo: set the outcome query: %w", err)
	case !res.Applied:
		out.printf("proposed the reference worker's outcome query as policy change %d: a second admin must approve it", res.ChangeID)
	default:
		out.printf("policy: outcome_query reads schema %s, outcome_window %s", worker.Schema, outcomeWindow)
	}
	return nil
}
