package tuitest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/backend"
)

// Letter returns letter n of a test archive: letters are a minute apart,
// letter 1 the oldest, categories and queues in turn.
func Letter(n int) deadletter.Row {
	cats := []deadletter.Category{deadletter.TransientExhausted, deadletter.Validation, deadletter.NotFound, deadletter.Conflict}
	classes := []string{"db_timeout", "validation", "not_found", "version_conflict"}
	queues := []string{"reservation-expiry.dlq", "reservation-expiry-eu.dlq"}
	return deadletter.Row{
		ID:             int64(n),
		MessageID:      fmt.Sprintf("expire:r-%d:v3", n),
		ReservationID:  fmt.Sprintf("r-%d", n),
		IdempotencyKey: fmt.Sprintf("expire:r-%d:v3", n),
		Category:       cats[n%len(cats)],
		ErrorClass:     classes[n%len(classes)],
		Attempts:       3,
		Status:         deadletter.StatusDead,
		SourceQueue:    queues[n%len(queues)],
		DeadLetteredAt: Epoch.Add(-time.Duration(10000-n) * time.Minute),
		LastError:      fmt.Sprintf("expire reservation r-%d: timeout", n),
	}
}

// Hostile is the payload of a letter built to take over a terminal: it sets
// the title, clears the screen and moves the cursor.
const Hostile = "\x1b]0;pwned\x07\x1b[2J\x1b[10;10Hexpiry worker crashed \u009b31m"

// HostileLetter is letter n carrying Hostile in every text field.
func HostileLetter(n int) deadletter.Row {
	r := Letter(n)
	r.ReservationID = "r-\x1b[2J" + fmt.Sprint(n)
	r.ErrorClass = "x\x1b]0;pwned\x07"
	r.LastError = Hostile
	r.MessageID = "m-\x1b[10;10H"
	return r
}

// DetailOf is a full detail for row r with a JSON payload, headers, a
// timeline and x-death.
func DetailOf(r deadletter.Row, payload []byte) deadletter.Detail {
	v := int64(3)
	headers := deadletter.EncodeHeaders(map[string]any{
		"x-error-class": r.ErrorClass, "x-last-error": r.LastError,
		"x-original-exchange": "reservations", "x-original-routing-key": "reservation.expire",
	})
	return deadletter.Detail{
		Row: r, OriginalExchange: "reservations", OriginalRoutingKey: "reservation.expire",
		ExpectedVersion: &v, ContentType: "application/json",
		AttemptHistory: []deadletter.AttemptEvent{
			{At: r.DeadLetteredAt.Add(-20 * time.Second), Source: "worker", ErrorClass: r.ErrorClass, Error: "attempt 1: " + r.LastError},
			{At: r.DeadLetteredAt, Source: "worker", ErrorClass: r.ErrorClass, Error: "attempt 2: " + r.LastError},
		},
		Deaths:        []deadletter.Death{{Count: 1, Reason: "rejected", Queue: "reservation-expiry", Exchange: "reservations", RoutingKeys: []string{"reservation.expire"}, Time: r.DeadLetteredAt}},
		Headers:       headers,
		Payload:       payload,
		PayloadSize:   len(payload),
		PayloadSHA256: strings.Repeat("ab", 32),
		IngestedAt:    r.DeadLetteredAt.Add(time.Second),
		Incarnations:  []deadletter.Row{},
	}
}

// Archive is a fake archive over rows held in memory. It lists newest first
// by keyset like the real one and records the calls.
type Archive struct {
	mu      sync.Mutex
	rows    []deadletter.Row
	details map[int64]deadletter.Detail
	err     error
	// Lists counts List calls; Shows the ids shown.
	Lists int
	Shows []int64
}

// NewArchive returns a fake archive of rows (any order).
func NewArchive(rows ...deadletter.Row) *Archive {
	a := &Archive{details: map[int64]deadletter.Detail{}}
	a.rows = append(a.rows, rows...)
	slices.SortFunc(a.rows, func(x, y deadletter.Row) int {
		if c := y.DeadLetteredAt.Compare(x.DeadLetteredAt); c != 0 {
			return c
		}
		return int(y.ID - x.ID)
	})
	return a
}

// Letters returns an archive of letters 1 … n.
func Letters(n int) *Archive {
	rows := make([]deadletter.Row, n)
	for i := range rows {
		rows[i] = Letter(i + 1)
	}
	return NewArchive(rows...)
}

// SetDetail makes Show return d for d.ID.
func (a *Archive) SetDetail(d deadletter.Detail) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.details[d.ID] = d
}

// SetErr makes every call fail with err (nil: succeed again), as an outage.
func (a *Archive) SetErr(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.err = err
}

func match(f deadletter.Filter, r deadletter.Row) bool {
	if len(f.Categories) > 0 && !slices.Contains(f.Categories, r.Category) {
		return false
	}
	if f.Queue != "" && r.SourceQueue != f.Queue {
		return false
	}
	if f.Status != "" && r.Status != f.Status {
		return false
	}
	if s := strings.ToLower(f.Search); s != "" {
		hay := strings.ToLower(r.ReservationID + " " + r.MessageID + " " + r.IdempotencyKey + " " + r.ErrorClass + " " + r.LastError)
		return strings.Contains(hay, s)
	}
	return true
}

// Summary counts the rows per category.
func (a *Archive) Summary(context.Context) ([]deadletter.CategorySummary, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return nil, a.err
	}
	by := map[deadletter.Category]*deadletter.CategorySummary{}
	for _, r := range a.rows {
		s := by[r.Category]
		if s == nil {
			s = &deadletter.CategorySummary{Category: r.Category, Queues: []string{}}
			by[r.Category] = s
		}
		s.Total++
		if r.Status == deadletter.StatusDead || r.Status == deadletter.StatusInRequest {
			s.Count++
			at := r.DeadLetteredAt
			if s.OldestDeadLetteredAt == nil || at.Before(*s.OldestDeadLetteredAt) {
				s.OldestDeadLetteredAt = &at
			}
			if !slices.Contains(s.Queues, r.SourceQueue) {
				s.Queues = append(s.Queues, r.SourceQueue)
				slices.Sort(s.Queues)
			}
		}
	}
	var out []deadletter.CategorySummary
	for _, c := range deadletter.Categories() {
		if s := by[c]; s != nil {
			out = append(out, *s)
		}
	}
	return out, nil
}

// List pages the matching rows newest first.
func (a *Archive) List(_ context.Context, f deadletter.Filter, after *deadletter.Cursor, limit int) (deadletter.Page, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Lists++
	if a.err != nil {
		return deadletter.Page{}, a.err
	}
	var page deadletter.Page
	for _, r := range a.rows {
		if !match(f, r) {
			continue
		}
		if after != nil && !(r.DeadLetteredAt.Before(after.DeadLetteredAt) || (r.DeadLetteredAt.Equal(after.DeadLetteredAt) && r.ID < after.ID)) {
			continue
		}
		if len(page.Rows) == limit {
			last := page.Rows[limit-1]
			page.Next = &deadletter.Cursor{DeadLetteredAt: last.DeadLetteredAt, ID: last.ID}
			break
		}
		page.Rows = append(page.Rows, r)
	}
	return page, nil
}

// Stream emits every matching row newest first, after after.
func (a *Archive) Stream(_ context.Context, f deadletter.Filter, after *deadletter.Cursor, emit func(deadletter.Row) error) error {
	a.mu.Lock()
	rows, err := a.rows, a.err
	a.mu.Unlock()
	if err != nil {
		return err
	}
	for _, r := range rows {
		if !match(f, r) {
			continue
		}
		if after != nil && !(r.DeadLetteredAt.Before(after.DeadLetteredAt) || (r.DeadLetteredAt.Equal(after.DeadLetteredAt) && r.ID < after.ID)) {
			continue
		}
		if err := emit(r); err != nil {
			return err
		}
	}
	return nil
}

// Show returns the detail set for id, or one made from its row.
func (a *Archive) Show(_ context.Context, id int64) (deadletter.Detail, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Shows = append(a.Shows, id)
	if a.err != nil {
		return deadletter.Detail{}, a.err
	}
	if d, ok := a.details[id]; ok {
		return d, nil
	}
	for _, r := range a.rows {
		if r.ID == id {
			return DetailOf(r, fmt.Appendf(nil, `{"reservation_id":%q,"expected_version":3}`, r.ReservationID)), nil
		}
	}
	return deadletter.Detail{}, &deadletter.NotFoundError{ID: id}
}

// OldestArchive is a fake archive that also lists oldest first.
type OldestArchive struct{ *Archive }

// ListOldest pages the matching rows oldest first.
func (a OldestArchive) ListOldest(_ context.Context, f deadletter.Filter, after *deadletter.Cursor, limit int) (deadletter.Page, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Lists++
	if a.err != nil {
		return deadletter.Page{}, a.err
	}
	var page deadletter.Page
	for i := len(a.rows) - 1; i >= 0; i-- {
		r := a.rows[i]
		if !match(f, r) {
			continue
		}
		if after != nil && !(r.DeadLetteredAt.After(after.DeadLetteredAt) || (r.DeadLetteredAt.Equal(after.DeadLetteredAt) && r.ID > after.ID)) {
			continue
		}
		if len(page.Rows) == limit {
			last := page.Rows[limit-1]
			page.Next = &deadletter.Cursor{DeadLetteredAt: last.DeadLetteredAt, ID: last.ID}
			break
		}
		page.Rows = append(page.Rows, r)
	}
	return page, nil
}

// Requests is a fake replay.Service: it keeps requests in memory and
// enforces four-eyes the way the service does.
type Requests struct {
	mu    sync.Mutex
	Actor string
	reqs  []replay.Request
	err   error
	// Created are the requests asked for.
	Created []replay.NewRequest
	// Refuse, when set, refuses every Create.
	Refuse *replay.Refusal
}

// NewRequests returns a fake acting as actor over reqs.
func NewRequests(actor string, reqs ...replay.Request) *Requests {
	return &Requests{Actor: actor, reqs: reqs}
}

// SetErr makes every call fail with err (nil: succeed again).
func (q *Requests) SetErr(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.err = err
}

// Request returns a pending replay request id of items letters by who.
func Request(id int64, who string, items int) replay.Request {
	return replay.Request{ID: id, Kind: replay.KindReplay, Status: replay.StatusPending, Items: items,
		Filter: json.RawMessage(`{"ids":[1,2]}`), CohortHash: strings.Repeat("cd", 32), Rate: 20, Canary: 1,
		Stop: replay.StopConditions{FailureRatio: 0.05, QueueDepth: 10000, RedeadRatio: 0.2, CanaryWindow: 30 * time.Second},
		Why:  "INC-4211 db failover", RequestedBy: who, RequestedDBRole: "root",
		CreatedAt: Epoch.Add(-5 * time.Minute), ExpiresAt: Epoch.Add(time.Hour)}
}

// Create records nr and adds a pending request.
func (q *Requests) Create(_ context.Context, nr replay.NewRequest) (replay.Created, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return replay.Created{}, q.err
	}
	if q.Refuse != nil {
		return replay.Created{}, q.Refuse
	}
	q.Created = append(q.Created, nr)
	items := len(nr.Selection.IDs)
	if items == 0 {
		items = nr.Selection.Max
	}
	r := Request(int64(len(q.reqs)+1), q.Actor, items)
	r.Kind, r.Why = nr.Kind, nr.Why
	q.reqs = append(q.reqs, r)
	return replay.Created{Request: r, Matched: items}, nil
}

func (q *Requests) find(id int64) (int, error) {
	for i, r := range q.reqs {
		if r.ID == id {
			return i, nil
		}
	}
	return 0, &replay.NotFoundError{ID: id}
}

// Show returns request id with a sample cohort.
func (q *Requests) Show(_ context.Context, id int64, sample int) (replay.Detail, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return replay.Detail{}, q.err
	}
	i, err := q.find(id)
	if err != nil {
		return replay.Detail{}, err
	}
	r := q.reqs[i]
	d := replay.Detail{Request: r, Categories: map[deadletter.Category]int{deadletter.TransientExhausted: r.Items},
		States: map[string]int{"pending": r.Items}, Changes: []replay.CohortChange{}}
	for n := 0; n < min(r.Items, sample); n++ {
		d.Sample = append(d.Sample, replay.Item{DeadLetterID: int64(n + 1), Ordinal: n, PayloadSHA256: strings.Repeat("ef", 32),
			State: "pending", Category: deadletter.TransientExhausted, ReservationID: fmt.Sprintf("r-%d", n+1),
			ErrorClass: "db_timeout", Target: "exchange reservations key reservation.expire"})
	}
	return d, nil
}

// List returns the requests newest first.
func (q *Requests) List(_ context.Context, status replay.Status, limit int) ([]replay.Request, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return nil, q.err
	}
	var out []replay.Request
	for i := len(q.reqs) - 1; i >= 0 && len(out) < limit; i-- {
		if status == "" || q.reqs[i].Status == status {
			out = append(out, q.reqs[i])
		}
	}
	return out, nil
}

func (q *Requests) review(id int64, to replay.Status, opts replay.ReviewOptions) (replay.Request, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return replay.Request{}, q.err
	}
	i, err := q.find(id)
	if err != nil {
		return replay.Request{}, err
	}
	r := &q.reqs[i]
	if r.Status != replay.StatusPending {
		return replay.Request{}, &replay.Refusal{Rule: "single-review", Message: fmt.Sprintf("replay request %d is %s: it was already reviewed", id, r.Status)}
	}
	if r.RequestedBy == q.Actor {
		return replay.Request{}, &replay.Refusal{Rule: "four-eyes", Message: fmt.Sprintf("%s requested replay request %d and cannot review it: ask another approver (bob)", q.Actor, id)}
	}
	r.Status, r.ReviewedBy, r.ReviewWhy = to, q.Actor, opts.Why
	return *r, nil
}

// Approve approves id unless the actor requested it.
func (q *Requests) Approve(_ context.Context, id int64, opts replay.ReviewOptions) (replay.Request, error) {
	return q.review(id, replay.StatusApproved, opts)
}

// Reject rejects id unless the actor requested it.
func (q *Requests) Reject(_ context.Context, id int64, opts replay.ReviewOptions) (replay.Request, error) {
	return q.review(id, replay.StatusRejected, opts)
}

// Cancel cancels id.
func (q *Requests) Cancel(_ context.Context, id int64, why string) (replay.Request, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	i, err := q.find(id)
	if err != nil {
		return replay.Request{}, err
	}
	q.reqs[i].Status = replay.StatusCancelled
	q.reqs[i].HaltReason = "cancelled by " + q.Actor
	return q.reqs[i], nil
}

// Runner is a fake runner that reports Steps, then ends with Summary.
type Runner struct {
	Steps   []backend.RunProgress
	Summary backend.RunSummary
	// Hold, when set, is waited on before the run ends.
	Hold chan struct{}
}

// Run reports the steps and returns the summary.
func (r *Runner) Run(ctx context.Context, _ int64, progress func(backend.RunProgress)) (backend.RunSummary, error) {
	for _, p := range r.Steps {
		progress(p)
	}
	if r.Hold != nil {
		select {
		case <-r.Hold:
		case <-ctx.Done():
			return backend.RunSummary{}, ctx.Err()
		}
	}
	return r.Summary, nil
}

// Audit is a fake audit trail of entries n … 1.
type Audit struct {
	mu      sync.Mutex
	entries []backend.AuditEntry
	Check   backend.AuditCheck
}

// NewAudit returns a trail of n rows by alternating actors.
func NewAudit(n int) *Audit {
	a := &Audit{Check: backend.AuditCheck{OK: true, Rows: int64(n), Head: int64(n)}}
	actions := []string{"dlq.summary", "dlq.list", "dlq.show", "replay.request", "replay.approve"}
	actors := []string{"alice", "bob"}
	for i := n; i >= 1; i-- {
		a.entries = append(a.entries, backend.AuditEntry{Seq: int64(i), At: Epoch.Add(-time.Duration(n-i) * time.Second),
			Actor: actors[i%2], DBRole: "root", Action: actions[i%len(actions)], Target: fmt.Sprintf("dead_letter:%d", i%7),
			Outcome: "ok", Details: fmt.Sprintf(`{"n":%d}`, i)})
	}
	return a
}

// List pages the matching entries newest first.
func (a *Audit) List(_ context.Context, f backend.AuditFilter, before int64, limit int) (backend.AuditPage, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var p backend.AuditPage
	for _, e := range a.entries {
		if (before != 0 && e.Seq >= before) || (f.Actor != "" && e.Actor != f.Actor) || (f.Action != "" && e.Action != f.Action) || (f.Target != "" && e.Target != f.Target) {
			continue
		}
		if len(p.Entries) == limit {
			p.Next = p.Entries[limit-1].Seq
			break
		}
		p.Entries = append(p.Entries, e)
	}
	return p, nil
}

// Verify returns Check.
func (a *Audit) Verify(context.Context) (backend.AuditCheck, error) { return a.Check, nil }

// Services returns services over the fakes, acting as actor.
func Services(archive service.Archive, requests *Requests) backend.Services {
	return backend.Services{
		Archive: archive, Requests: requests, Actor: requests.Actor, Now: Now,
		Policy: func(context.Context) (replay.Policy, error) {
			return replay.Policy{Approvers: []string{"alice", "bob"}, MaxCohort: 500, MaxRate: 50}, nil
		},
	}
}
