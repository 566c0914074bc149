package replay

import (
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
)

// ReviewOptions are what an approver adds to a review.
type ReviewOptions struct {
	Why string
	// AllowFreshKey is the approver's explicit consent to a request that
	// gives replayed jobs a new idempotency key.
	AllowFreshKey bool
	// CohortHash is the cohort hash (hex) the approver was shown; an
	// approval of a request whose hash differs is refused (rule
	// cohort-hash).
	CohortHash string
	// ApprovalKey, when set, is the approver's signing key (from `keys
	// generate`): the approval carries the approver's signed statement of
	// what they approved, valid for the policy's approval TTL.
	ApprovalKey string
	// Now is the clock the signed statement's expiry counts from.
	Now func() time.Time
}

// Approve approves request id as the service's login, through the schema's
// replay_review function. The database refuses self-approval (by login,
// whatever the label), approvers outside the policy, expired or already
// reviewed requests, a cohort hash other than the one shown and cohorts
// that changed since they were frozen; the refusal comes back as a *Refusal
// naming the rule. An approval authorises one run.
func (s *Service) Approve(ctx context.Context, id int64, opts ReviewOptions) (Request, error) {
	return s.review(ctx, id, StatusApproved, opts)
}

// Reject rejects request id; its letters are free again. Why is required.
func (s *Service) Reject(ctx context.Context, id int64, opts ReviewOptions) (Request, error) {
	return s.review(ctx, id, StatusRejected, opts)
}

func (s *Service) review(ctx context.Context, id int64, to Status, opts ReviewOptions) (Request, error) {
	action, decision := "replay.approve", "approve"
	if to == StatusRejected {
		action, decision = "replay.reject", "reject"
	}
	var shown []byte
	if opts.CohortHash != "" {
		var err error
		if shown, err = hex.DecodeString(opts.CohortHash); err != nil {
			err = refuse("cohort-hash", "cohort hash %q is not hex: copy it from `expiryctl replay show %d`", opts.CohortHash, id)
			s.recordRefusal(ctx, action, requestTarget(id), err, map[string]any{"why": opts.Why})
			return Request{}, err
		}
	}
	var out Request
	err := inTx(ctx, s.Pool, func(t tables) error {
		var signed []byte
		if opts.ApprovalKey != "" && to == StatusApproved {
			var err error
			if signed, err = signApproval(ctx, t, id, opts); err != nil {
				return err
			}
		}
		if err := t.RequestReview(ctx, s.Actor, id, decision, opts.Why, opts.AllowFreshKey, shown, signed); err != nil {
			return err
		}
		var err error
		out, err = t.RequestGet(ctx, id)
		return err
	})
	if err != nil {
		s.recordRefusal(ctx, action, requestTarget(id), err, map[string]any{"why": opts.Why})
		// A request refused for expiry is marked so, for everyone to see.
		if r, ok := errors.AsType[*Refusal](err); ok && r.Rule == "approval-ttl" {
			_ = s.tables().RequestExpireStale(context.WithoutCancel(ctx), s.Actor)
		}
		return Request{}, err
	}
	return out, nil
}

// Cancel stops a pending, approved, running or halted request. A running
// runner notices at its next check and stops publishing. Letters not yet
// replayed are free again.
func (s *Service) Cancel(ctx context.Context, id int64, why string) (Request, error) {
	var out Request
	err := inTx(ctx, s.Pool, func(t tables) error {
		if err := t.RequestCancel(ctx, s.Actor, id, why); err != nil {
			return err
		}
		var err error
		out, err = t.RequestGet(ctx, id)
		return err
	})
	if err != nil {
		s.recordRefusal(ctx, "replay.cancel", requestTarget(id), err, map[string]any{"why": why})
	}
	return out, err
}

// Item is one frozen letter of a request and its run state.
type Item struct {
	DeadLetterID  int64               `json:"dead_letter_id"`
	Ordinal       int                 `json:"ordinal"`
	PayloadSHA256 string              `json:"payload_sha256"`
	State         string              `json:"state"`
	Attempts      int                 `json:"attempts"`
	LastError     string              `json:"last_error,omitempty"`
	Category      deadletter.Category `json:"reason_category"`
	ReservationID string              `json:"reservation_id"`
	ErrorClass    string              `json:"error_class"`
	// Target is where a replay would publish it.
	Target string `json:"target"`
}

// Detail is everything an approver approves.
type Detail struct {
	Request
	// Categories counts the cohort per reason category.
	Categories map[deadletter.Category]int `json:"categories"`
	// States counts the items per run state.
	States map[string]int `json:"states"`
	// Sample is the first items of the cohort, in run order.
	Sample []Item `json:"sample"`
	// Changes lists letters whose state no longer matches the frozen cohort;
	// approval is refused while there are any.
	Changes []CohortChange `json:"cohort_changes"`
	// Properties says where the replayed messages' properties will differ
	// from those the letters were received with.
	Properties PropertyNotes `json:"properties"`
	// RetriesInPlace says a run retries the cohort's jobs where their
	// store keeps them and sends no copy, as the archive describes the
	// request's system.
	RetriesInPlace bool `json:"retries_in_place"`
	// Timing says when the cohort's letters may go: their holds' deadlines,
	// their Retry-After, what the run holds back. Nil for a discard.
	Timing *Timing `json:"timing,omitempty"`
	// Outcomes sums up the outcomes its runs recorded (replay_outcomes):
	// Watched is the items confirmed, Waiting those without an outcome.
	// Nil when none were recorded.
	Outcomes *OutcomeStats `json:"outcomes,omitempty"`
	// Handler is the handler check as it stands: the versions the cohort
	// failed under (Request.FailedUnder) against what consumes its targets
	// now. Nil for a discard.
	Handler *HandlerCheck `json:"handler,omitempty"`
	// Permanent lists the cohort's letters that failed for good (the
	// first maxPermanentShown), apart, for the approver; PermanentCount
	// counts them all.
	Permanent      []PermanentLetter `json:"permanent_letters"`
	PermanentCount int               `json:"permanent_count"`
}

// Timing is when a cohort's letters may go, by the database's clock.
type Timing struct {
	// PastDue and NotYetDue count the letters whose hold's deadline
	// (due_at) has passed and has not; NoDueAt those that name none.
	// DueFrom and DueTo are the earliest and latest deadline.
	PastDue   int        `json:"past_due"`
	NotYetDue int        `json:"not_yet_due"`
	NoDueAt   int        `json:"no_due_at"`
	DueFrom   *time.Time `json:"due_from,omitempty"`
	DueTo     *time.Time `json:"due_to,omitempty"`
	// RetryAfter counts the letters whose last error asked to be left
	// alone until a time still to come (Retry-After, x-retry-after), the
	// last of them until RetryAfterUntil.
	RetryAfter      int        `json:"retry_after"`
	RetryAfterUntil *time.Time `json:"retry_after_until,omitempty"`
	// Held counts the items still to publish that a run would hold back
	// now (its --not-before, a Retry-After, a hold not yet due), the last
	// of them until HeldUntil.
	Held      int        `json:"held"`
	HeldUntil *time.Time `json:"held_until,omitempty"`
}

// PropertyNotes counts the letters of a cohort whose properties a replay
// cannot send as they were received (its driver's Encode).
type PropertyNotes struct {
	// NotRecorded counts letters captured before expiryctl recorded
	// properties: they are sent with content type and message id only.
	NotRecorded int `json:"not_recorded"`
	// MadePersistent counts letters that were not persistent (delivery mode
	// 1 or none); they are sent persistent.
	MadePersistent int `json:"made_persistent"`
	// UserIDs counts the letters per user_id. RabbitMQ accepts a user_id
	// only from a connection of that user, so each is kept when the run
	// publishes as that user and otherwise moves to the
	// x-original-user-id header.
	UserIDs map[string]int `json:"user_ids"`
}

// CohortChange is a letter that changed since its request was frozen.
type CohortChange struct {
	DeadLetterID int64  `json:"dead_letter_id"`
	Change       string `json:"change"`
}

// Show returns request id with its cohort, for the approver. sample bounds
// the items listed (0 lists all). Audited.
func (s *Service) Show(ctx context.Context, id int64, sample int) (Detail, error) {
	d, err := s.detail(ctx, id, sample)
	if err != nil {
		s.recordRefusal(ctx, "replay.show", requestTarget(id), err, map[string]any{})
		return Detail{}, err
	}
	return d, audit.Record(ctx, s.Pool, audit.Entry{Actor: s.Actor, Action: "replay.show", Target: requestTarget(id),
		Details: map[string]any{"status": d.Status, "cohort_hash": d.CohortHash, "items": d.Items}})
}

func (s *Service) detail(ctx context.Context, id int64, sample int) (Detail, error) {
	t := s.tables()
	req, err := t.RequestGet(ctx, id)
	if err != nil {
		return Detail{}, err
	}
	one := []Request{req}
	if err := markRunners(ctx, t, one); err != nil {
		return Detail{}, err
	}
	if err := markFates(ctx, t, one); err != nil {
		return Detail{}, err
	}
	d := Detail{Request: one[0], Changes: []CohortChange{}}
	if d.RetriesInPlace, err = t.RetriesInPlace(ctx, req.System()); err != nil {
		return Detail{}, err
	}
	if d.Categories, d.States, err = t.ItemsCountByCategoryAndState(ctx, id); err != nil {
		return Detail{}, err
	}
	if d.Sample, err = t.ItemsSample(ctx, req, sample); err != nil {
		return Detail{}, err
	}
	if req.Kind == KindReplay {
		timing, err := t.ItemsTiming(ctx, id)
		if err != nil {
			return Detail{}, err
		}
		d.Timing = &timing
	}
	if d.Properties, err = t.ItemsPropertyNotes(ctx, id); err != nil {
		return Detail{}, err
	}
	if d.Outcomes, err = t.OutcomesSummary(ctx, id); err != nil {
		return Detail{}, err
	}
	if req.Open() {
		if d.Changes, err = t.ItemsCohortChanges(ctx, id); err != nil {
			return Detail{}, err
		}
	}
	if err := s.handlerDetail(ctx, t, &d); err != nil {
		return Detail{}, err
	}
	return d, nil
}

// List returns requests newest first, optionally of one status. Audited.
func (s *Service) List(ctx context.Context, status Status, limit int) ([]Request, error) {
	if err := inTx(ctx, s.Pool, func(t tables) error { return t.RequestExpireStale(ctx, s.Actor) }); err != nil {
		return nil, err
	}
	out, err := s.listWithRunners(ctx, status, limit)
	if err != nil {
		return nil, err
	}
	return out, audit.Record(ctx, s.Pool, audit.Entry{Actor: s.Actor, Action: "replay.list",
		Details: map[string]any{"status": status, "returned": len(out)}})
}

// CountOpen counts open requests by status. It neither writes nor audits:
// it serves views that refresh on a timer, such as the terminal UI's summary.
func (s *Service) CountOpen(ctx context.Context) (map[Status]int, error) {
	return s.tables().RequestCountOpen(ctx)
}

// CountRunnersGone counts the running requests that no runner holds (see
// Request.RunnerGone), without writing or auditing, for the same views as
// CountOpen: a count of running requests alone reads as work in progress.
func (s *Service) CountRunnersGone(ctx context.Context) (int, error) {
	return s.tables().RequestCountRunnersGone(ctx)
}
