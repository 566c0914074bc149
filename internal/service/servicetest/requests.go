package servicetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

// RequestsWorld is one requests case's implementation: letters to make
// requests of, and the service as distinct people who share one set of
// requests. Each person may request, approve and cancel (no policy names
// approvers).
type RequestsWorld struct {
	// Letters archives n dead letters waiting for a decision, each with an
	// origin to replay to, and returns their ids, oldest first.
	Letters func(n int) []int64
	// As is the service acting as person (a name such as "alice"): what
	// one person creates, the others see and review.
	As func(person string) service.Requests
}

// Requests runs the requests contract: each case gets a world of its own
// from newWorld.
func Requests(t *testing.T, newWorld func(t *testing.T) RequestsWorld) {
	runCases(t, newWorld, []contractCase[RequestsWorld]{
		{"CreateFreezesAPendingRequestOfTheLetters", requestsCreate},
		{"CreateNeedsAWhy", requestsCreateWhy},
		{"AFilterNeedsAMax", requestsCreateBounded},
		{"ALetterIsInOneOpenRequestAtATime", requestsOneOpen},
		{"ShowAndListAgree", requestsShowListAgree},
		{"ListIsNewestFirstByStatusAndLimit", requestsList},
		{"AnUnknownRequestIsNotFound", requestsNotFound},
		{"TheRequesterCannotReviewTheirOwn", requestsFourEyes},
		{"AnotherApprovesWithTheShownCohortHash", requestsApprove},
		{"ApprovalNeedsTheShownCohortHash", requestsCohortHash},
		{"RejectNeedsAWhy", requestsRejectWhy},
		{"ARequestIsReviewedOnce", requestsSingleReview},
		{"CancelEndsAnOpenRequestAndFreesItsLetters", requestsCancel},
		{"CancelOfAnEndedRequest", requestsCancelEnded},
	})
}

// unknownRequest is an id no case creates.
const unknownRequest int64 = 987654321

// newReplay asks, as svc, for a replay of ids.
func newReplay(t *testing.T, svc service.Requests, ids ...int64) replay.Request {
	t.Helper()
	return create(t, svc, replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{IDs: ids}, Why: "INC-4211 db failover"}).Request
}

func create(t *testing.T, svc service.Requests, nr replay.NewRequest) replay.Created {
	t.Helper()
	created, err := svc.Create(context.Background(), nr)
	if err != nil {
		t.Fatalf("create %s of %v: %v", nr.Kind, nr.Selection.IDs, err)
	}
	return created
}

// show returns request id with all its cohort.
func show(t *testing.T, svc service.Requests, id int64) replay.Detail {
	t.Helper()
	d, err := svc.Show(context.Background(), id, 0)
	if err != nil {
		t.Fatalf("show %d: %v", id, err)
	}
	return d
}

// approve approves id as svc with the cohort hash its Show shows.
func approve(t *testing.T, svc service.Requests, id int64) replay.Request {
	t.Helper()
	r, err := svc.Approve(context.Background(), id, replay.ReviewOptions{Why: "looked at the cohort", CohortHash: show(t, svc, id).CohortHash})
	if err != nil {
		t.Fatalf("approve %d: %v", id, err)
	}
	return r
}

func reject(t *testing.T, svc service.Requests, id int64) replay.Request {
	t.Helper()
	r, err := svc.Reject(context.Background(), id, replay.ReviewOptions{Why: "not this cohort"})
	if err != nil {
		t.Fatalf("reject %d: %v", id, err)
	}
	return r
}

// wantStatus fails unless svc shows request id with status.
func wantStatus(t *testing.T, svc service.Requests, id int64, status replay.Status) {
	t.Helper()
	if got := show(t, svc, id).Status; got != status {
		t.Fatalf("request %d is %s, want %s", id, got, status)
	}
}

// wantNotFound fails unless err says request id does not exist.
func wantNotFound(t *testing.T, err error, id int64) {
	t.Helper()
	nf, ok := errors.AsType[*replay.NotFoundError](err)
	if !ok {
		t.Fatalf("got %v (%T), want *replay.NotFoundError", err, err)
	}
	if nf.ID != id {
		t.Fatalf("not found names request %d, want %d", nf.ID, id)
	}
}

// ids lists the requests' ids in order.
func ids(reqs []replay.Request) []int64 {
	out := []int64{}
	for _, r := range reqs {
		out = append(out, r.ID)
	}
	return out
}

func isHex(s string) bool {
	return s != "" && strings.Trim(s, "0123456789abcdef") == ""
}

func requestsCreate(t *testing.T, w RequestsWorld) {
	letters := w.Letters(3)
	created := create(t, w.As("alice"), replay.NewRequest{Kind: replay.KindReplay,
		Selection: replay.Selection{IDs: letters}, Why: "INC-4211 db failover"})
	r := created.Request
	if r.ID <= 0 || r.Kind != replay.KindReplay || r.Status != replay.StatusPending {
		t.Fatalf("created %+v, want a pending replay with an id", r)
	}
	if r.Items != 3 || created.Matched != 3 {
		t.Errorf("items %d, matched %d, want 3 and 3", r.Items, created.Matched)
	}
	if r.RequestedBy != "alice" || r.Why != "INC-4211 db failover" {
		t.Errorf("requested by %q why %q, want alice and the why given", r.RequestedBy, r.Why)
	}
	if len(r.CohortHash) != 64 || !isHex(r.CohortHash) {
		t.Errorf("cohort hash %q, want 64 hex digits (sha256)", r.CohortHash)
	}
	if r.ReviewedBy != "" || r.ReviewedAt != nil || r.ApprovalExpiresAt != nil {
		t.Errorf("a new request is unreviewed: %+v", r)
	}
	if !r.ExpiresAt.After(r.CreatedAt) {
		t.Errorf("expires at %v, not after its creation at %v", r.ExpiresAt, r.CreatedAt)
	}
}

func requestsCreateWhy(t *testing.T, w RequestsWorld) {
	letters := w.Letters(1)
	alice := w.As("alice")
	for _, why := range []string{"", "  ", "\t", " \n\t "} {
		_, err := alice.Create(context.Background(), replay.NewRequest{Kind: replay.KindReplay,
			Selection: replay.Selection{IDs: letters}, Why: why})
		wantRefusal(t, err, "why")
	}
	// Nothing was frozen: the letter is free for a request that says why.
	newReplay(t, alice, letters...)
}

func requestsCreateBounded(t *testing.T, w RequestsWorld) {
	w.Letters(2)
	_, err := w.As("alice").Create(context.Background(), replay.NewRequest{Kind: replay.KindDiscard, Why: "INC-1"})
	wantRefusal(t, err, "bounded-cohort")
}

func requestsOneOpen(t *testing.T, w RequestsWorld) {
	ctx := context.Background()
	letters := w.Letters(3)
	alice, bob := w.As("alice"), w.As("bob")
	first := newReplay(t, alice, letters[:2]...)
	_, err := bob.Create(ctx, replay.NewRequest{Kind: replay.KindDiscard, Selection: replay.Selection{IDs: letters[1:]}, Why: "INC-2"})
	wantRefusal(t, err, "one-open-request")
	// An approved request still holds its letters.
	approve(t, bob, first.ID)
	_, err = bob.Create(ctx, replay.NewRequest{Kind: replay.KindDiscard, Selection: replay.Selection{IDs: letters[1:]}, Why: "INC-2"})
	wantRefusal(t, err, "one-open-request")
	// A letter in no request may be asked for on its own.
	newReplay(t, bob, letters[2])
}

func requestsShowListAgree(t *testing.T, w RequestsWorld) {
	ctx := context.Background()
	letters := w.Letters(3)
	alice, bob := w.As("alice"), w.As("bob")
	r := newReplay(t, alice, letters...)

	d := show(t, bob, r.ID)
	if d.ID != r.ID || d.Status != r.Status || d.Items != r.Items || d.CohortHash != r.CohortHash ||
		d.RequestedBy != r.RequestedBy || d.Kind != r.Kind || d.Why != r.Why {
		t.Fatalf("show %+v, want the request created %+v", d.Request, r)
	}
	var sampled []int64
	for i, it := range d.Sample {
		sampled = append(sampled, it.DeadLetterID)
		if it.Ordinal != i || it.State != "pending" || len(it.PayloadSHA256) != 64 {
			t.Errorf("item %d: %+v, want ordinal %d, pending, a payload hash", i, it, i)
		}
	}
	// The whole cohort, in run order (the order the letters were named).
	if !slices.Equal(sampled, letters) {
		t.Errorf("sample of all: letters %v, want %v", sampled, letters)
	}
	if d.States["pending"] != 3 {
		t.Errorf("states %v, want 3 pending", d.States)
	}
	two, err := bob.Show(ctx, r.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(two.Sample); got != 2 || two.Sample[0].DeadLetterID != letters[0] {
		t.Errorf("sample of 2: %+v, want the first 2 items", two.Sample)
	}

	listed, err := bob.List(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 {
		t.Fatalf("list: %v, want the one request", ids(listed))
	}
	l := listed[0]
	if l.ID != r.ID || l.Status != d.Status || l.Items != d.Items || l.CohortHash != d.CohortHash || l.RequestedBy != d.RequestedBy {
		t.Fatalf("list %+v, show %+v: they differ", l, d.Request)
	}
}

func requestsList(t *testing.T, w RequestsWorld) {
	ctx := context.Background()
	letters := w.Letters(4)
	alice, bob := w.As("alice"), w.As("bob")
	a := newReplay(t, alice, letters[0])
	b := newReplay(t, alice, letters[1])
	c := newReplay(t, bob, letters[2])
	d := newReplay(t, bob, letters[3])
	reject(t, bob, b.ID)
	approve(t, alice, c.ID)

	for _, tt := range []struct {
		status replay.Status
		limit  int
		want   []int64
	}{
		{"", 10, []int64{d.ID, c.ID, b.ID, a.ID}},
		{"", 2, []int64{d.ID, c.ID}},
		{replay.StatusPending, 10, []int64{d.ID, a.ID}},
		{replay.StatusPending, 1, []int64{d.ID}},
		{replay.StatusRejected, 10, []int64{b.ID}},
		{replay.StatusApproved, 10, []int64{c.ID}},
		{replay.StatusCancelled, 10, []int64{}},
	} {
		got, err := alice.List(ctx, tt.status, tt.limit)
		if err != nil {
			t.Fatalf("list %q limit %d: %v", tt.status, tt.limit, err)
		}
		if !slices.Equal(ids(got), tt.want) {
			t.Errorf("list %q limit %d: %v, want %v", tt.status, tt.limit, ids(got), tt.want)
		}
		for _, r := range got {
			if tt.status != "" && r.Status != tt.status {
				t.Errorf("list %q returned request %d, %s", tt.status, r.ID, r.Status)
			}
		}
	}
}

func requestsNotFound(t *testing.T, w RequestsWorld) {
	ctx := context.Background()
	w.Letters(1)
	bob := w.As("bob")
	_, err := bob.Show(ctx, unknownRequest, 0)
	wantNotFound(t, err, unknownRequest)
	_, err = bob.Approve(ctx, unknownRequest, replay.ReviewOptions{Why: "x", CohortHash: strings.Repeat("ab", 32)})
	wantNotFound(t, err, unknownRequest)
	// Not found comes before what the review lacks.
	_, err = bob.Approve(ctx, unknownRequest, replay.ReviewOptions{})
	wantNotFound(t, err, unknownRequest)
	_, err = bob.Reject(ctx, unknownRequest, replay.ReviewOptions{Why: "x"})
	wantNotFound(t, err, unknownRequest)
	_, err = bob.Reject(ctx, unknownRequest, replay.ReviewOptions{})
	wantNotFound(t, err, unknownRequest)
	_, err = bob.Cancel(ctx, unknownRequest, "x")
	wantNotFound(t, err, unknownRequest)
}

func requestsFourEyes(t *testing.T, w RequestsWorld) {
	ctx := context.Background()
	alice := w.As("alice")
	r := newReplay(t, alice, w.Letters(2)...)
	_, err := alice.Approve(ctx, r.ID, replay.ReviewOptions{Why: "mine", CohortHash: show(t, alice, r.ID).CohortHash})
	wantRefusal(t, err, "four-eyes")
	_, err = alice.Reject(ctx, r.ID, replay.ReviewOptions{Why: "mine"})
	wantRefusal(t, err, "four-eyes")
	wantStatus(t, alice, r.ID, replay.StatusPending)
}

func requestsApprove(t *testing.T, w RequestsWorld) {
	ctx := context.Background()
	alice, bob := w.As("alice"), w.As("bob")
	r := newReplay(t, alice, w.Letters(2)...)
	hash := show(t, bob, r.ID).CohortHash
	got, err := bob.Approve(ctx, r.ID, replay.ReviewOptions{Why: "cohort checked", CohortHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != r.ID || got.Status != replay.StatusApproved || got.ReviewedBy != "bob" || got.ReviewWhy != "cohort checked" {
		t.Fatalf("approved %+v, want approved by bob for his why", got)
	}
	if got.ReviewedAt == nil || got.ApprovalExpiresAt == nil || !got.ApprovalExpiresAt.After(*got.ReviewedAt) {
		t.Fatalf("reviewed at %v, approval expires at %v: want both, the expiry later", got.ReviewedAt, got.ApprovalExpiresAt)
	}
	if got.Approvals != 1 || got.ApprovalSpent {
		t.Errorf("approvals %d, spent %v: want one approval, unspent", got.Approvals, got.ApprovalSpent)
	}
	if got.CohortHash != hash || got.RequestedBy != "alice" {
		t.Errorf("approval changed the request: %+v", got)
	}
	if d := show(t, alice, r.ID); d.Status != replay.StatusApproved || d.ReviewedBy != "bob" {
		t.Errorf("show after approval: %s by %q", d.Status, d.ReviewedBy)
	}
}

func requestsCohortHash(t *testing.T, w RequestsWorld) {
	ctx := context.Background()
	alice, bob := w.As("alice"), w.As("bob")
	r := newReplay(t, alice, w.Letters(2)...)
	for _, hash := range []string{strings.Repeat("00", 32), "", "not hex"} {
		_, err := bob.Approve(ctx, r.ID, replay.ReviewOptions{Why: "x", CohortHash: hash})
		wantRefusal(t, err, "cohort-hash")
	}
	wantStatus(t, bob, r.ID, replay.StatusPending)
	approve(t, bob, r.ID)
}

func requestsRejectWhy(t *testing.T, w RequestsWorld) {
	ctx := context.Background()
	alice, bob := w.As("alice"), w.As("bob")
	letters := w.Letters(1)
	r := newReplay(t, alice, letters...)
	for _, why := range []string{"", "   ", "\t", "\r\n"} {
		_, err := bob.Reject(ctx, r.ID, replay.ReviewOptions{Why: why})
		wantRefusal(t, err, "why")
	}
	wantStatus(t, bob, r.ID, replay.StatusPending)
	got := reject(t, bob, r.ID)
	if got.Status != replay.StatusRejected || got.ReviewedBy != "bob" || got.ReviewWhy != "not this cohort" || got.ReviewedAt == nil {
		t.Fatalf("rejected %+v, want rejected by bob for his why", got)
	}
	if got.ApprovalExpiresAt != nil {
		t.Errorf("a rejection has no approval to expire: %v", got.ApprovalExpiresAt)
	}
	if got.FinishedAt == nil {
		t.Errorf("a rejected request is over, with no finish time")
	}
	// Its letters are free again.
	newReplay(t, alice, letters...)
}

func requestsSingleReview(t *testing.T, w RequestsWorld) {
	ctx := context.Background()
	letters := w.Letters(2)
	alice, bob, carol := w.As("alice"), w.As("bob"), w.As("carol")
	approved := newReplay(t, alice, letters[0])
	hash := approve(t, bob, approved.ID).CohortHash
	_, err := carol.Approve(ctx, approved.ID, replay.ReviewOptions{Why: "me too", CohortHash: hash})
	wantRefusal(t, err, "single-review")
	_, err = carol.Reject(ctx, approved.ID, replay.ReviewOptions{Why: "overrule"})
	wantRefusal(t, err, "single-review")
	_, err = bob.Approve(ctx, approved.ID, replay.ReviewOptions{Why: "again", CohortHash: hash})
	wantRefusal(t, err, "single-review")

	rejected := newReplay(t, alice, letters[1])
	reject(t, bob, rejected.ID)
	_, err = carol.Approve(ctx, rejected.ID, replay.ReviewOptions{Why: "overrule", CohortHash: show(t, carol, rejected.ID).CohortHash})
	wantRefusal(t, err, "single-review")
	if d := show(t, alice, approved.ID); d.Status != replay.StatusApproved || d.ReviewedBy != "bob" {
		t.Errorf("request %d is %s by %q after refused reviews, want approved by bob", d.ID, d.Status, d.ReviewedBy)
	}
}

func requestsCancel(t *testing.T, w RequestsWorld) {
	ctx := context.Background()
	letters := w.Letters(2)
	alice, bob := w.As("alice"), w.As("bob")
	pending := newReplay(t, alice, letters[0])
	got, err := bob.Cancel(ctx, pending.ID, "wrong cohort")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != pending.ID || got.Status != replay.StatusCancelled || got.HaltReason != "cancelled by bob" {
		t.Fatalf("cancelled %+v, want cancelled by bob", got)
	}
	wantStatus(t, alice, pending.ID, replay.StatusCancelled)

	approved := newReplay(t, alice, letters[1])
	approve(t, bob, approved.ID)
	if got, err := alice.Cancel(ctx, approved.ID, "not now"); err != nil || got.Status != replay.StatusCancelled {
		t.Fatalf("cancel of an approved request: %+v, %v", got, err)
	}
	// A cancelled request cannot be reviewed.
	_, err = bob.Approve(ctx, pending.ID, replay.ReviewOptions{Why: "x", CohortHash: pending.CohortHash})
	wantRefusal(t, err, "single-review")
	// Both letters are free again.
	newReplay(t, bob, letters...)
}

func requestsCancelEnded(t *testing.T, w RequestsWorld) {
	ctx := context.Background()
	letters := w.Letters(2)
	alice, bob := w.As("alice"), w.As("bob")
	rejected := newReplay(t, alice, letters[0])
	reject(t, bob, rejected.ID)
	_, err := alice.Cancel(ctx, rejected.ID, "tidy up")
	wantRefusal(t, err, "cancel")
	wantStatus(t, alice, rejected.ID, replay.StatusRejected)

	cancelled := newReplay(t, alice, letters[1])
	if _, err := alice.Cancel(ctx, cancelled.ID, "first"); err != nil {
		t.Fatal(err)
	}
	_, err = bob.Cancel(ctx, cancelled.ID, "second")
	wantRefusal(t, err, "cancel")
	if d := show(t, bob, cancelled.ID); d.Status != replay.StatusCancelled || d.HaltReason != "cancelled by alice" {
		t.Errorf("request %d is %s, %q: want cancelled by alice still", d.ID, d.Status, d.HaltReason)
	}
}
