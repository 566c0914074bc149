package deadletter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
)

// Archive answers triage queries over the captured dead letters. Every query
// leaves an audit row naming Actor.
type Archive struct {
	pool    *pgxpool.Pool
	letters letterStore
	actor   string
	// quiet leaves summaries and listings unaudited; Show is always audited.
	quiet bool
}

// NewArchive returns an Archive over pool whose reads are audited as actor.
func NewArchive(pool *pgxpool.Pool, actor string) *Archive {
	return &Archive{pool: pool, letters: newPostgresLetters(pool), actor: actor}
}

// WithoutListingAudit returns a copy of a whose Summary and List calls write
// no audit row. It is for views that refresh on a timer, like the terminal
// UI, whose session is audited once when it opens; opening a letter (Show),
// which reveals its payload, is audited all the same.
func (a *Archive) WithoutListingAudit() *Archive {
	quiet := *a
	quiet.quiet = true
	return &quiet
}

// record writes an audit row unless a is quiet.
func (a *Archive) record(ctx context.Context, e audit.Entry) error {
	if a.quiet {
		return nil
	}
	return audit.Record(ctx, a.pool, e)
}

// CategorySummary is one line of the triage summary.
type CategorySummary struct {
	Category Category `json:"reason_category"`
	// Count is the letters still waiting for a decision (dead or in a request).
	Count int64 `json:"count"`
	// Total includes letters already replayed or discarded.
	Total int64 `json:"total"`
	// OldestDeadLetteredAt is the oldest letter still waiting, nil when none.
	OldestDeadLetteredAt *time.Time `json:"oldest_dead_lettered_at"`
	// Queues are the dead-letter queues the waiting letters came from.
	Queues []string `json:"queues"`
	// Systems are the queue systems of Queues (QueueSystem).
	Systems []System `json:"systems"`
}

// Summary returns the letters per reason category, in the order of
// Categories. Its cost does not grow with the archive.
func (a *Archive) Summary(ctx context.Context) ([]CategorySummary, error) {
	lines, err := a.letters.LetterSummary(ctx)
	if err != nil {
		return nil, a.fail(ctx, "dlq.summary", "", nil, err)
	}
	byCategory := map[Category]CategorySummary{}
	for _, s := range lines {
		byCategory[s.Category] = s
	}
	summary := make([]CategorySummary, 0, len(byCategory))
	var waiting int64
	for _, c := range Categories() {
		if s, ok := byCategory[c]; ok {
			summary = append(summary, s)
			waiting += s.Count
		}
	}
	err = a.record(ctx, audit.Entry{Actor: a.actor, Action: "dlq.summary",
		Details: map[string]any{"categories": len(summary), "waiting": waiting}})
	return summary, err
}

// Row is one dead letter as `dlq list` shows it.
type Row struct {
	ID              int64      `json:"id"`
	MessageID       string     `json:"message_id"`
	ReservationID   string     `json:"reservation_id"`
	IdempotencyKey  string     `json:"idempotency_key"`
	Category        Category   `json:"reason_category"`
	ErrorClass      string     `json:"error_class"`
	Attempts        int        `json:"attempts"`
	Status          Status     `json:"status"`
	SourceQueue     string     `json:"source_queue"`
	DeadLetteredAt  time.Time  `json:"dead_lettered_at"`
	DueAt           *time.Time `json:"due_at"`
	LastError       string     `json:"last_error"`
	PreviousID      *int64     `json:"previous_id"`
	ReplayRequestID *int64     `json:"replay_request_id"`
	// System is the queue system the letter was captured from.
	System System `json:"system"`
}

// Filter narrows a listing. Zero fields do not filter.
type Filter struct {
	Categories []Category `json:"reason,omitempty"`
	Queue      string     `json:"queue,omitempty"`
	Status     Status     `json:"status,omitempty"`
	Since      time.Time  `json:"since,omitzero"`
	Until      time.Time  `json:"until,omitzero"`
	// Search matches a substring of the reservation id, message id,
	// idempotency key, error class or last error, case-insensitively.
	Search string `json:"search,omitempty"`
	// ReplayRequest keeps the letters that died again after replay
	// request ReplayRequest put their job back on the queue (captured with
	// its x-replay-request header).
	ReplayRequest int64 `json:"replay_request,omitempty"`
}

// Cursor marks a position in the newest-first order: the listing continues
// with letters strictly older than it.
type Cursor struct {
	DeadLetteredAt time.Time
	ID             int64
}

// String encodes c as the opaque token `dlq list --after` takes.
func (c Cursor) String() string {
	raw := strconv.FormatInt(c.DeadLetteredAt.UnixMicro(), 10) + ":" + strconv.FormatInt(c.ID, 10)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ParseCursor decodes a token made by Cursor.String.
func ParseCursor(token string) (Cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return Cursor{}, fmt.Errorf("invalid cursor %q: use the value `dlq list` printed after \"next page:\"", token)
	}
	micros, id, ok := strings.Cut(string(raw), ":")
	t, err1 := strconv.ParseInt(micros, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return Cursor{}, fmt.Errorf("invalid cursor %q: use the value `dlq list` printed after \"next page:\"", token)
	}
	return Cursor{DeadLetteredAt: time.UnixMicro(t).UTC(), ID: n}, nil
}

// Page is one page of a listing.
type Page struct {
	Rows []Row
	// Next continues the listing; nil on the last page.
	Next *Cursor
}

// List returns up to limit letters matching f, newest first, starting after
// the cursor when one is given. It pages by keyset, so a page deep in a large
// archive costs what the first page costs.
func (a *Archive) List(ctx context.Context, f Filter, after *Cursor, limit int) (Page, error) {
	return a.list(ctx, f, after, limit, false)
}

// ListOldest is List in the other order: oldest first, continuing with
// letters strictly newer than the cursor.
func (a *Archive) ListOldest(ctx context.Context, f Filter, after *Cursor, limit int) (Page, error) {
	return a.list(ctx, f, after, limit, true)
}

func (a *Archive) list(ctx context.Context, f Filter, after *Cursor, limit int, oldestFirst bool) (Page, error) {
	page, err := a.page(ctx, f, after, limit, oldestFirst)
	details := listDetails(f, after, limit, len(page.Rows))
	if oldestFirst {
		details["order"] = "oldest first"
	}
	if err != nil {
		return Page{}, a.fail(ctx, "dlq.list", "", details, err)
	}
	return page, a.record(ctx, audit.Entry{Actor: a.actor, Action: "dlq.list", Details: details})
}

// Stream calls emit for every letter matching f, newest first, reading the
// archive a page at a time so that memory stays bounded whatever its size.
func (a *Archive) Stream(ctx context.Context, f Filter, after *Cursor, emit func(Row) error) error {
	const pageSize = 2000
	var n int
	cursor := after
	for {
		page, err := a.page(ctx, f, cursor, pageSize, false)
		if err != nil {
			return a.fail(ctx, "dlq.list", "", listDetails(f, after, 0, n), err)
		}
		for _, r := range page.Rows {
			if err := emit(r); err != nil {
				return a.fail(ctx, "dlq.list", "", listDetails(f, after, 0, n), err)
			}
			n++
		}
		if page.Next == nil {
			break
		}
		cursor = page.Next
	}
	return a.record(ctx, audit.Entry{Actor: a.actor, Action: "dlq.list", Details: listDetails(f, after, 0, n)})
}

func listDetails(f Filter, after *Cursor, limit, returned int) map[string]any {
	d := map[string]any{"filter": f, "limit": limit, "returned": returned}
	if after != nil {
		d["after"] = after.String()
	}
	return d
}

func (a *Archive) page(ctx context.Context, f Filter, after *Cursor, limit int, oldestFirst bool) (Page, error) {
	if limit < 1 {
		return Page{}, fmt.Errorf("a page holds at least one letter, not %d: Stream reads them all", limit)
	}
	// One row more than asked tells whether a next page exists.
	out, err := a.letters.LetterList(ctx, letterListParams{Filter: f, After: after, Limit: limit + 1, OldestFirst: oldestFirst})
	if err != nil {
		return Page{}, err
	}
	var page Page
	if len(out) > limit {
		out = out[:limit]
		last := out[len(out)-1]
		page.Next = &Cursor{DeadLetteredAt: last.DeadLetteredAt, ID: last.ID}
	}
	page.Rows = out
	return page, nil
}

// ErrNotFound means no dead letter has the requested id.
var ErrNotFound = errors.New("dead letter not found")

// NotFoundError names the dead letter that does not exist.
type NotFoundError struct{ ID int64 }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("dead letter %d not found: `expiryctl dlq list` shows the ids there are", e.ID)
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// Detail is everything known about one dead letter.
type Detail struct {
	Row
	OriginQueue        string         `json:"origin_queue"`
	OriginalExchange   string         `json:"original_exchange"`
	OriginalRoutingKey string         `json:"original_routing_key"`
	ExpectedVersion    *int64         `json:"expected_version"`
	ContentType        string         `json:"content_type"`
	AttemptHistory     []AttemptEvent `json:"attempt_history"`
	Deaths             []Death        `json:"x_death"`
	// Properties are the AMQP basic properties as received; null for a
	// letter captured before they were recorded.
	Properties *Properties `json:"properties"`
	// Native is the source system's own attributes of the message (SQS's
	// system attributes and message id) as received; null for RabbitMQ,
	// whose are its Properties.
	Native        map[string]string `json:"native"`
	Headers       json.RawMessage   `json:"headers"`
	Payload       []byte            `json:"payload"`
	PayloadSize   int               `json:"payload_size"`
	PayloadSHA256 string            `json:"payload_sha256"`
	IngestedAt    time.Time         `json:"ingested_at"`
	ReplayCount   int               `json:"replay_count"`
	RedactedAt    *time.Time        `json:"redacted_at"`
	// Incarnations are the other dead-letterings of the same job, oldest first.
	Incarnations []Row `json:"incarnations"`
	// PayloadProblem says why the payload does not read as an expiry job
	// (see PayloadProblem); empty when it does, or when it was redacted.
	PayloadProblem string `json:"payload_problem,omitempty"`
}

// Show returns one letter with its payload, headers, timeline and other
// incarnations. Payload views are audited.
func (a *Archive) Show(ctx context.Context, id int64) (Detail, error) {
	target := "dead_letter:" + strconv.FormatInt(id, 10)
	d, err := a.detail(ctx, id)
	if err != nil {
		outcome := audit.Failed
		if errors.Is(err, ErrNotFound) {
			outcome = audit.Refused
		}
		_ = audit.Record(ctx, a.pool, audit.Entry{Actor: a.actor, Action: "dlq.show", Target: target,
			Details: map[string]any{"error": audit.ErrorText(err)}, Outcome: outcome})
		return Detail{}, err
	}
	return d, audit.Record(ctx, a.pool, audit.Entry{Actor: a.actor, Action: "dlq.show", Target: target,
		Details: map[string]any{"payload_sha256": d.PayloadSHA256, "payload_size": d.PayloadSize}})
}

func (a *Archive) detail(ctx context.Context, id int64) (Detail, error) {
	l, err := a.letters.LetterGet(ctx, id)
	if err != nil {
		return Detail{}, err
	}
	d := l.Detail
	d.DeadLetteredAt = d.DeadLetteredAt.UTC()
	d.IngestedAt = d.IngestedAt.UTC()
	d.PayloadSHA256 = fmt.Sprintf("%x", l.payloadHash)
	if err := json.Unmarshal(l.history, &d.AttemptHistory); err != nil {
		return Detail{}, fmt.Errorf("dead letter %d: attempt history: %w", id, err)
	}
	if l.properties != nil {
		p, err := DecodeProperties(l.properties)
		if err != nil {
			return Detail{}, fmt.Errorf("dead letter %d: %w", id, err)
		}
		d.Properties = &p
	}
	if headers, err := DecodeHeaders(d.Headers); err == nil {
		d.Deaths = Parse(Message{Headers: headers}, DefaultClassifier(), d.IngestedAt).Deaths
	}
	if d.RedactedAt == nil {
		encoding := ""
		if d.Properties != nil {
			encoding = d.Properties.ContentEncoding
		}
		d.PayloadProblem = PayloadProblem(d.Payload, encoding)
	}
	d.Incarnations = []Row{}
	if l.jobKey != nil && *l.jobKey != "" {
		if d.Incarnations, err = a.letters.LetterListByJob(ctx, *l.jobKey, id); err != nil {
			return Detail{}, err
		}
	}
	return d, nil
}

// fail records a failed read and returns err unchanged.
func (a *Archive) fail(ctx context.Context, action, target string, details map[string]any, err error) error {
	if details == nil {
		details = map[string]any{}
	}
	details["error"] = audit.ErrorText(err)
	_ = audit.Record(ctx, a.pool, audit.Entry{Actor: a.actor, Action: action, Target: target, Details: details, Outcome: audit.Failed})
	return err
}
