package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/store"
)

// Kind says what running a request does to its letters.
type Kind string

// The kinds of request.
const (
	KindReplay  Kind = "replay"
	KindDiscard Kind = "discard"
)

// Status is where a request stands.
type Status string

// The statuses of a request. Pending, approved, running and halted are open:
// their letters cannot join another request.
const (
	StatusPending   Status = "pending"
	StatusApproved  Status = "approved"
	StatusRejected  Status = "rejected"
	StatusExpired   Status = "expired"
	StatusRunning   Status = "running"
	StatusHalted    Status = "halted"
	StatusCompleted Status = "completed"
	StatusCancelled Status = "cancelled"
)

// Statuses lists every request status.
func Statuses() []Status {
	return []Status{StatusPending, StatusApproved, StatusRejected, StatusExpired, StatusRunning, StatusHalted, StatusCompleted, StatusCancelled}
}

// ParseStatus returns the status named s or an error listing the valid ones.
func ParseStatus(s string) (Status, error) {
	names := []string{}
	for _, st := range Statuses() {
		if string(st) == s {
			return st, nil
		}
		names = append(names, string(st))
	}
	return "", fmt.Errorf("unknown request status %q: valid statuses are %s", s, strings.Join(names, ", "))
}

// StopConditions halt a run when the replay makes things worse. Its JSON
// carries the canary window in seconds, as canary_window_seconds.
type StopConditions struct {
	// FailureRatio: failed publishes over attempted publishes.
	FailureRatio float64 `json:"failure_ratio"`
	// QueueDepth: messages waiting in the target queue (the headroom).
	QueueDepth int `json:"queue_depth"`
	// RedeadRatio: replayed letters dead-lettered again over those published.
	RedeadRatio float64 `json:"redead_ratio"`
	// CanaryWindow: how long the canary's letters have to come back.
	CanaryWindow time.Duration `json:"-"`
}

// Request is a replay or discard request.
type Request struct {
	ID                   int64           `json:"id"`
	Kind                 Kind            `json:"kind"`
	Status               Status          `json:"status"`
	Items                int             `json:"items"`
	Filter               json.RawMessage `json:"filter"`
	CohortHash           string          `json:"cohort_hash"`
	Rate                 float64         `json:"rate"`
	Canary               int             `json:"canary"`
	Stop                 StopConditions  `json:"stop_conditions"`
	FreshKey             bool            `json:"fresh_key"`
	EligibilityConfirmed bool            `json:"eligibility_confirmed"`
	ToExchange           string          `json:"to_exchange,omitempty"`
	ToRoutingKey         string          `json:"to_routing_key,omitempty"`
	Why                  string          `json:"why"`
	RequestedBy          string          `json:"requested_by"`
	RequestedDBRole      string          `json:"requested_db_role"`
	CreatedAt            time.Time       `json:"created_at"`
	ExpiresAt            time.Time       `json:"expires_at"`
	ReviewedBy           string          `json:"reviewed_by,omitempty"`
	ReviewedDBRole       string          `json:"reviewed_db_role,omitempty"`
	ReviewedAt           *time.Time      `json:"reviewed_at,omitempty"`
	ReviewWhy            string          `json:"review_why,omitempty"`
	ApprovalSpent        bool            `json:"approval_spent"`
	ApprovalExpiresAt    *time.Time      `json:"approval_expires_at,omitempty"`
	Approvals            int             `json:"approvals"`
	StartedAt            *time.Time      `json:"started_at,omitempty"`
	FinishedAt           *time.Time      `json:"finished_at,omitempty"`
	HaltReason           string          `json:"halt_reason,omitempty"`
	// SameHandlerOK is the requester's word that the handler version that
	// failed the cohort may take it again (the dependency recovered, the
	// handler was never at fault), with SameHandlerWhy: the run skips the
	// handler check. Shown to the approver.
	SameHandlerOK  bool   `json:"same_handler_ok"`
	SameHandlerWhy string `json:"same_handler_why,omitempty"`
	// IncludePermanent says the cohort may hold letters that failed for
	// good (deadletter.PermanentCategories), which a request refuses otherwise.
	IncludePermanent bool `json:"include_permanent"`
	// FailedUnder counts the cohort's letters per handler version
	// (x-handler-version), most first; frozen with the cohort.
	FailedUnder []VersionCount `json:"failed_under"`
	// Targets are where the cohort's letters are published, most letters
	// first (the 20 largest); frozen with the cohort.
	Targets []Target `json:"targets"`
	// ViaExchange says the letters go through their original exchange,
	// where every queue bound to it gets a copy, rather than back to the
	// queue each failed in alone (`--via-exchange`).
	ViaExchange bool `json:"via_exchange"`
	// NotBefore, when set, is the earliest time the run publishes any
	// letter of it (`--not-before`).
	NotBefore *time.Time `json:"not_before,omitempty"`
	// IncludeNotDue publishes letters whose hold is not yet due, or whose
	// last error asked to be retried later (Retry-After), without waiting
	// for them (`--include-not-due`).
	IncludeNotDue bool `json:"include_not_due"`
	// UnwatchedWhy, when set, is the requester's reason why the run need
	// not capture the dead-letter queues its cohort came from
	// (`--unwatched`): without it a run that cannot see its jobs die again
	// does not start (rule dlq-unwatched). Shown to the approver.
	UnwatchedWhy string `json:"unwatched_why,omitempty"`
	// Fates, for a replay with confirmed items (Show and List fill it
	// in), says how many came back, settled or are unknown.
	Fates *Fates `json:"fates,omitempty"`
	// ApprovalNote is the approver's signed statement of what they
	// approved (a signed note, see package approval); empty for an
	// unsigned approval.
	ApprovalNote string `json:"approval_note,omitempty"`
	// RunnerHeld is set for a running request only (Show and List fill it
	// in): whether a runner's session holds the request's runner lock.
	// False means no process runs it (its runner was interrupted, killed
	// or lost its connection) and `expiryctl replay run` resumes it.
	RunnerHeld *bool `json:"runner_held,omitempty"`
	// Runner names the session that holds the runner lock (see
	// lockHolder.String); empty when none does.
	Runner string `json:"runner,omitempty"`
}

// System is the queue system the request's letters came from and go back
// to: the one its targets name, else deadletter.DefaultSystem. A request
// holds the letters of one system (replay_request_create refuses a mix).
func (r Request) System() deadletter.System {
	for _, t := range r.Targets {
		if t.System != "" {
			return t.System
		}
	}
	return deadletter.DefaultSystem
}

// CanaryGates reports whether the request's canary holds anything back:
// a canary of none, or of the whole cohort, gates nothing, so a run has no
// canary phase and watches for letters coming back after its last publish.
func (r Request) CanaryGates() bool { return r.Canary > 0 && r.Canary < r.Items }

// Open reports whether the request still holds its letters.
func (r Request) Open() bool {
	switch r.Status {
	case StatusPending, StatusApproved, StatusRunning, StatusHalted:
		return true
	}
	return false
}

// Service is the request side of replay: create, show, list, review, cancel.
// Every call is audited as Actor.
type Service struct {
	Pool  *pgxpool.Pool
	Actor string
	// Consumers, when set, lets Show say what consumes an open replay's
	// targets now, beside the versions its cohort failed under.
	Consumers Consumers
}

// Selection chooses the letters of a new request: explicit ids, or a filter
// bounded by Max (the oldest matching letters first).
type Selection struct {
	IDs    []int64           `json:"ids,omitempty"`
	Filter deadletter.Filter `json:"filter,omitzero"`
	Max    int               `json:"max,omitempty"`
}

// NewRequest is what a requester asks for.
type NewRequest struct {
	Kind      Kind
	Selection Selection
	// Rate is the replay ceiling per second; 0 means the policy maximum.
	Rate float64
	// Canary is how many letters go first; nil means 10% of the cohort, at
	// least 1 (0 for a discard).
	Canary *int
	// ToExchange and ToRoutingKey are the target for letters that name no
	// queue they failed in (nor, with ViaExchange, an original exchange).
	ToExchange, ToRoutingKey string
	// Why is the incident or ticket; required.
	Why string
	// FreshKey gives each replayed job a new idempotency key; it requires
	// ConfirmEligible, the requester's word that the reservations are still
	// eligible, and the approver's explicit consent.
	FreshKey        bool
	ConfirmEligible bool
	// SameHandlerWhy, when set, lets the run replay onto consumers that run
	// a handler version the cohort failed under, or onto no consumer: the
	// requester's reason, shown to the approver (`--same-handler-ok`).
	SameHandlerWhy string
	// IncludePermanent lets the cohort hold letters that failed for good
	// (conflict, validation, malformed, not-found): `--include-permanent`.
	IncludePermanent bool
	// ViaExchange publishes through each letter's original exchange and
	// routing key, where every queue bound to them gets a copy, instead of
	// back to the queue it failed in: `--via-exchange`.
	ViaExchange bool
	// NotBefore schedules the replay: nothing is published before it
	// (`--not-before`). It must be in the future and before retention
	// redacts the cohort's oldest letter.
	NotBefore *time.Time
	// IncludeNotDue publishes letters not yet due (their hold's deadline,
	// their Retry-After) without waiting for them: `--include-not-due`.
	IncludeNotDue bool
	// UnwatchedWhy lets the run start without capturing its cohort's
	// dead-letter queues, saying why (`--unwatched "why"`).
	UnwatchedWhy string
}

// Created is the result of Create.
type Created struct {
	Request Request `json:"request"`
	// Matched counts the letters the filter matched before --max bounded it.
	Matched int `json:"matched"`
}

// NotFoundError names a request that does not exist.
type NotFoundError struct{ ID int64 }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("replay request %d not found: `expiryctl replay list` shows the requests there are", e.ID)
}

// Is makes errors.Is(err, deadletter.ErrNotFound) true, so that both map to
// the same exit code.
func (e *NotFoundError) Is(target error) bool { return target == deadletter.ErrNotFound }

// Get reads one request without auditing it; callers audit what they do.
// q may be a pool or a transaction.
func Get(ctx context.Context, q store.Querier, id int64) (Request, error) {
	return onPostgres(q).RequestGet(ctx, id)
}

func (s *Service) tables() tables { return onPostgres(s.Pool) }

func requestTarget(id int64) string { return "replay_request:" + strconv.FormatInt(id, 10) }

// Create freezes a new request through the schema's replay_request_create
// function: the database resolves the selection (ids, or the oldest waiting
// letters a filter matches, bounded by Max), hashes each payload as stored,
// numbers and counts the items, hashes the cohort, and writes the audit row,
// all in one transaction. Nothing of the cohort comes from here. Letters
// already in another open request are refused when named by id, and not
// matched by a filter (which selects only letters waiting for a decision).
func (s *Service) Create(ctx context.Context, nr NewRequest) (Created, error) {
	selection, err := json.Marshal(nr.Selection)
	if err != nil {
		return Created{}, err
	}
	var created Created
	err = inTx(ctx, s.Pool, func(t tables) error {
		id, matched, err := t.RequestCreate(ctx, s.Actor, nr, selection)
		if err != nil {
			return err
		}
		created.Matched = matched
		created.Request, err = t.RequestGet(ctx, id)
		return err
	})
	if err != nil {
		s.recordRefusal(ctx, "replay.request", "", err, map[string]any{"kind": nr.Kind, "selection": nr.Selection, "why": nr.Why})
		return Created{}, err
	}
	return created, nil
}

// recordRefusal audits a request that was refused or failed; the state
// change rolled back, so the row goes in on its own.
func (s *Service) recordRefusal(ctx context.Context, action, target string, err error, details map[string]any) {
	_ = audit.RecordFailure(ctx, s.Pool, audit.Entry{Actor: s.Actor, Action: action, Target: target, Details: details}, err)
}
