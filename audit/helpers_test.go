package audit_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/audittest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// seedEpoch is when seeded trails begin.
var seedEpoch = time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)

// seedRow returns the fields of seeded row seq: a mix of the catalogue's
// actions, some unicode and escapes, and details already written the way
// jsonb prints them (keys shortest first, ", " and ": "), so that the hash
// computed here is the hash the database would compute.
func seedRow(seq int64) audit.ChainFields {
	actions := []string{"dlq.list", "dlq.show", "dlq.ingest.batch", "dlq.summary", "replay.request"}
	actors := []string{"alice", "bob", "oncall-ünïcode", "ci"}
	var details, target string
	switch seq % 5 {
	case 0:
		details = fmt.Sprintf(`{"limit": 50, "filter": {"reason": ["transient-exhausted"]}, "returned": %d}`, seq%51)
	case 1:
		target = fmt.Sprintf("dead_letter:%d", seq)
		details = fmt.Sprintf(`{"payload_size": %d, "payload_sha256": "%064x"}`, 100+seq%900, seq)
	case 2:
		target = "queue:reservation-expiry.dlq"
		details = fmt.Sprintf(`{"stored": 99, "last_id": %d, "letters": 100, "first_id": %d, "duplicates": 1}`, seq*100+99, seq*100)
	case 3:
		details = `{"waiting": 1234, "categories": 5}`
	default:
		target = fmt.Sprintf("replay_request:%d", seq)
		details = `{"why": "INC-4821 \"db failover\" — retry é", "rate": 10.5}`
	}
	return audit.ChainFields{
		Seq:      seq,
		AtMicros: seedEpoch.UnixMicro() + seq*1000 + seq%7,
		Actor:    actors[seq%int64(len(actors))],
		DBRole:   "root",
		Action:   actions[seq%int64(len(actions))],
		Target:   target,
		Details:  details,
		Outcome:  "ok",
	}
}

// seedChain appends n valid chained rows of seedRow's shape after the
// trail's current head (see audittest.SeedChain).
func seedChain(tb testing.TB, pool *pgxpool.Pool, n int64) audit.Anchor {
	tb.Helper()
	head, err := audittest.SeedChain(context.Background(), pool, n, seedRow)
	if err != nil {
		tb.Fatal(err)
	}
	return head
}

// tamper runs sql as the superuser with every trigger on audit_log disabled,
// which is what it takes to change the trail behind the append-only guards,
// and restores the triggers as the migration left them.
func tamper(tb testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	tb.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `ALTER TABLE expiryctl.audit_log DISABLE TRIGGER ALL`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			return err
		}
		for _, trg := range []string{"audit_log_who_and_when", "audit_log_no_update", "audit_log_no_delete", "audit_log_no_truncate"} {
			if _, err := tx.Exec(ctx, `ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER `+trg); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("tamper %q: %v", strings.TrimSpace(sql), err)
	}
}

// newTrail returns a fresh migrated database holding n seeded rows.
func newTrail(tb testing.TB, n int64) (*pgtest.Database, audit.Anchor) {
	tb.Helper()
	db := pgtest.New(tb)
	head := seedChain(tb, db.Pool, n)
	return db, head
}

// recordAsTheDatabase writes e the way the schema's own functions write
// their rows (audit_write, as the owner), for rows no client may record:
// hostile action and outcome text, which the trail must still hash, export
// and verify exactly, since a function or an older release may have
// written it.
func recordAsTheDatabase(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, e audit.Entry) error {
	details, err := json.Marshal(e.Details)
	if err != nil {
		return err
	}
	if e.Details == nil {
		details = []byte(`{}`)
	}
	outcome := cmp.Or(e.Outcome, audit.OK)
	_, err = q.Exec(ctx, `SELECT expiryctl.audit_write($1, $2, $3, $4::jsonb, $5)`, e.Actor, e.Action, e.Target, details, string(outcome))
	return err
}

// editedHeader returns an evidence file's header line, decoded, changed by
// f and encoded again, as someone editing the file would.
func editedHeader(t *testing.T, line string, f func(map[string]any)) string {
	t.Helper()
	var h map[string]any
	if err := json.Unmarshal([]byte(line), &h); err != nil {
		t.Fatal(err)
	}
	f(h)
	b, _ := json.Marshal(h)
	return string(b)
}

// unlisted takes seq out of a header's list of matched rows.
func unlisted(seq int) func(map[string]any) {
	return func(h map[string]any) {
		var kept []any
		for _, s := range h["matched"].([]any) {
			if int(s.(float64)) != seq {
				kept = append(kept, s)
			}
		}
		h["matched"] = kept
	}
}
