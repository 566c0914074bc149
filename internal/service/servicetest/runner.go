package servicetest

import (
	"context"
	"slices"
	"testing"

	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

// RunnerWorld is one runner case's implementation: letters, the request
// side to create and review requests as distinct people, and the runner as
// a person, over the same requests.
type RunnerWorld struct {
	// Letters archives n dead letters waiting for a decision, each with an
	// origin to replay to, and returns their ids, oldest first.
	Letters func(n int) []int64
	// As is the request side acting as person.
	As func(person string) service.Requests
	// Runner is the runner acting as person.
	Runner func(person string) service.Runner
}

// Runner runs the runner contract: each case gets a world of its own from
// newWorld. Its runs are of discards, which publish nothing.
func Runner(t *testing.T, newWorld func(t *testing.T) RunnerWorld) {
	runCases(t, newWorld, []contractCase[RunnerWorld]{
		{"AnUnknownRequestIsNotFound", runnerNotFound},
		{"APendingRequestIsRefusedBeforeItStarts", runnerPending},
		{"AnEndedRequestIsRefusedBeforeItStarts", runnerEnded},
		{"ADryRunListsTheItemsOfAnOpenRequest", runnerDryRun},
		{"AnApprovalAuthorisesOneRun", runnerOneRun},
	})
}

// newDiscard asks, as svc, for a discard of ids.
// discardCase is a discard of three letters requested by alice, for bob to
// approve and carol to run.
type discardCase struct {
	letters    []int64
	alice, bob service.Requests
	runner     service.Runner
	request    replay.Request
}

func newDiscardCase(t *testing.T, w RunnerWorld) discardCase {
	t.Helper()
	d := discardCase{letters: w.Letters(3), alice: w.As("alice"), bob: w.As("bob"), runner: w.Runner("carol")}
	d.request = newDiscard(t, d.alice, d.letters...)
	return d
}

func newDiscard(t *testing.T, svc service.Requests, ids ...int64) replay.Request {
	t.Helper()
	return create(t, svc, replay.NewRequest{Kind: replay.KindDiscard, Selection: replay.Selection{IDs: ids}, Why: "INC-4212 duplicates"}).Request
}

// wantNotStarted fails unless res is the result of a run refused before it
// started.
func wantNotStarted(t *testing.T, res replay.RunResult) {
	t.Helper()
	if res.Status != "" {
		t.Fatalf("a run refused before it started has no status; got %+v", res)
	}
}

func runnerNotFound(t *testing.T, w RunnerWorld) {
	ctx := context.Background()
	w.Letters(1)
	runner := w.Runner("carol")
	res, err := runner.Run(ctx, unknownRequest, nil)
	wantNotFound(t, err, unknownRequest)
	wantNotStarted(t, res)
	_, err = runner.DryRun(ctx, unknownRequest)
	wantNotFound(t, err, unknownRequest)
}

func runnerPending(t *testing.T, w RunnerWorld) {
	alice := w.As("alice")
	r := newDiscard(t, alice, w.Letters(2)...)
	// Not even the requester's own runner, nor anyone else's, runs it unapproved.
	for _, person := range []string{"alice", "carol"} {
		res, err := w.Runner(person).Run(context.Background(), r.ID, nil)
		wantRefusal(t, err, "approved-to-run")
		wantNotStarted(t, res)
	}
	wantStatus(t, alice, r.ID, replay.StatusPending)
}

func runnerEnded(t *testing.T, w RunnerWorld) {
	ctx := context.Background()
	letters := w.Letters(2)
	alice, bob := w.As("alice"), w.As("bob")
	runner := w.Runner("carol")
	rejected := newDiscard(t, alice, letters[0])
	reject(t, bob, rejected.ID)
	cancelled := newDiscard(t, alice, letters[1])
	if _, err := alice.Cancel(ctx, cancelled.ID, "not needed"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []replay.Request{rejected, cancelled} {
		res, err := runner.Run(ctx, r.ID, nil)
		wantRefusal(t, err, "terminal")
		wantNotStarted(t, res)
		_, err = runner.DryRun(ctx, r.ID)
		wantRefusal(t, err, "terminal")
	}
	wantStatus(t, alice, rejected.ID, replay.StatusRejected)
	wantStatus(t, alice, cancelled.ID, replay.StatusCancelled)
}

func runnerDryRun(t *testing.T, w RunnerWorld) {
	ctx := context.Background()
	d := newDiscardCase(t, w)
	letters, alice, bob, runner, r := d.letters, d.alice, d.bob, d.runner, d.request
	wantPlan := func(status replay.Status) {
		t.Helper()
		plan, err := runner.DryRun(ctx, r.ID)
		if err != nil {
			t.Fatalf("dry run of a %s request: %v", status, err)
		}
		if plan.Request.ID != r.ID || plan.Request.Status != status || plan.Request.Items != 3 {
			t.Fatalf("dry run of request %+v, want request %d, %s, 3 items", plan.Request, r.ID, status)
		}
		var got []int64
		for i, it := range plan.Items {
			got = append(got, it.DeadLetterID)
			if it.Ordinal != i || it.State != "pending" || it.Action != "discard" {
				t.Errorf("item %d: %+v, want ordinal %d, pending, to be discarded", i, it, i)
			}
		}
		if !slices.Equal(got, letters) {
			t.Errorf("dry run lists letters %v, want %v in run order", got, letters)
		}
		if plan.Counts["discard"] != 3 || len(plan.Counts) != 1 {
			t.Errorf("counts %v, want 3 discards", plan.Counts)
		}
		if plan.Canary != 0 {
			t.Errorf("canary %d: a discard has none", plan.Canary)
		}
	}
	// A pending request may be dry-run, for its approver to look first.
	wantPlan(replay.StatusPending)
	wantStatus(t, alice, r.ID, replay.StatusPending)
	approve(t, bob, r.ID)
	wantPlan(replay.StatusApproved)
	wantStatus(t, alice, r.ID, replay.StatusApproved)
}

func runnerOneRun(t *testing.T, w RunnerWorld) {
	ctx := context.Background()
	d := newDiscardCase(t, w)
	alice, bob, runner, r := d.alice, d.bob, d.runner, d.request
	approve(t, bob, r.ID)
	res, err := runner.Run(ctx, r.ID, nil)
	if err != nil {
		t.Fatalf("run of an approved discard: %v", err)
	}
	if res.RequestID != r.ID || res.Kind != replay.KindDiscard || res.Status != replay.StatusCompleted || res.Items != 3 || res.Resumed {
		t.Fatalf("run %+v, want request %d, a discard of 3 items, completed", res, r.ID)
	}
	wantStatus(t, alice, r.ID, replay.StatusCompleted)
	// The approval was spent: the request is over.
	res, err = runner.Run(ctx, r.ID, nil)
	wantRefusal(t, err, "terminal")
	wantNotStarted(t, res)
	_, err = runner.DryRun(ctx, r.ID)
	wantRefusal(t, err, "terminal")
}
