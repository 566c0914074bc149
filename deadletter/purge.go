package deadletter

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
)

// PurgeOptions says what retention removes.
type PurgeOptions struct {
	Actor string
	// OlderThan is the retention window: letters captured (ingested_at,
	// the database's clock) before now - OlderThan lose their payload and
	// headers. A letter's own dead_lettered_at is its claim, and retention
	// never runs on it.
	OlderThan time.Duration
	// DryRun counts without changing anything.
	DryRun bool
	// Batch is the most letters redacted per transaction (default 1000).
	Batch int
	// Progress, when set, is called after every batch.
	Progress func(PurgeResult)
}

// PurgeResult counts what a purge did (or, dry, would do).
type PurgeResult struct {
	Cutoff   time.Time `json:"cutoff"`
	Redacted int64     `json:"redacted"`
	// InRequest counts old letters that an open replay or discard request
	// holds: a frozen cohort cannot lose a payload, so the purge voids
	// (cancels) those requests, audited, and then redacts the letters.
	InRequest int64 `json:"in_request"`
	DryRun    bool  `json:"dry_run"`
}

// PurgePreview counts what Purge would redact for the window, without
// changing or auditing anything; callers use it to ask for confirmation.
func PurgePreview(ctx context.Context, pool *pgxpool.Pool, olderThan time.Duration) (PurgeResult, error) {
	return newPostgresLetters(pool).LetterPurgeCount(ctx, olderThan)
}

// Purge redacts the payload and headers of letters older than the window, in
// batches, each batch with its audit row in the same transaction. What a
// reviewer needs stays: identity, category, error class, attempt history,
// the payload's sha256 and size, and the audit trail. Nothing is deleted.
func Purge(ctx context.Context, pool *pgxpool.Pool, opts PurgeOptions) (PurgeResult, error) {
	if opts.OlderThan <= 0 {
		return PurgeResult{}, fmt.Errorf("purge needs a positive retention window")
	}
	if opts.Batch <= 0 {
		opts.Batch = 1000
	}
	letters := newPostgresLetters(pool)
	// The cutoff is fixed once, by the database's clock, so that every batch
	// works on the same window.
	res, err := letters.LetterPurgeCount(ctx, opts.OlderThan)
	if err != nil {
		return res, err
	}
	res.DryRun = opts.DryRun
	details := func() map[string]any {
		return map[string]any{"older_than": opts.OlderThan.String(), "cutoff": res.Cutoff, "redacted": res.Redacted,
			"in_request_voided": res.InRequest, "dry_run": opts.DryRun}
	}
	if opts.DryRun {
		return res, audit.Record(ctx, pool, audit.Entry{Actor: opts.Actor, Action: "dlq.purge", Details: details()})
	}
	res.Redacted = 0
	fail := func(err error) (PurgeResult, error) {
		d := details()
		d["error"] = audit.ErrorText(err)
		_ = audit.Record(context.WithoutCancel(ctx), pool, audit.Entry{Actor: opts.Actor, Action: "dlq.purge", Details: d, Outcome: audit.Failed})
		return res, err
	}
	// A pass can leave letters behind it: one another transaction held
	// locked (purge_letters skips those rather than wait), or a whole batch
	// that requests took between purge_letters' lock and its redaction,
	// which ends the pass early. So after each pass the purge counts what
	// is left and goes back for it, waiting a little when a pass redacted
	// nothing: the locks it met are a statement's, soon released.
	for idle := 0; ; {
		n, err := purgePass(ctx, letters, opts, &res)
		if err != nil {
			return fail(err)
		}
		left, err := letters.LetterPurgeLeft(ctx, res.Cutoff)
		if err != nil {
			return fail(err)
		}
		if left == 0 {
			break
		}
		if n > 0 {
			idle = 0
			continue
		}
		if idle++; idle == maxIdlePurgePasses {
			return fail(fmt.Errorf("%d letters past retention stayed locked by other transactions through %d passes; "+
				"run dlq purge again to redact them", left, idle))
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(purgeRetryWait):
		}
	}
	return res, audit.Record(ctx, pool, audit.Entry{Actor: opts.Actor, Action: "dlq.purge", Details: details()})
}

// purgePass redacts in batches from the lowest id up, each batch starting
// after the last letter the one before redacted, so that a pass reads the
// archive once, not once per batch; it stops at a batch that redacted
// nothing and says how many letters it redacted.
func purgePass(ctx context.Context, letters letterStore, opts PurgeOptions, res *PurgeResult) (int64, error) {
	var after, total int64
	for {
		// Each batch is redacted with its audit row in one statement.
		ids, err := letters.LetterPurge(ctx, opts.Actor, res.Cutoff, opts.Batch, after)
		if err != nil {
			return total, err
		}
		if len(ids) == 0 {
			return total, nil
		}
		n := int64(len(ids))
		total += n
		res.Redacted += n
		if opts.Progress != nil {
			opts.Progress(*res)
		}
		after = ids[len(ids)-1]
	}
}

// A purge gives up on letters that stay locked through maxIdlePurgePasses
// passes in a row that redacted nothing, purgeRetryWait apart.
const (
	maxIdlePurgePasses = 50
	purgeRetryWait     = 100 * time.Millisecond
)
