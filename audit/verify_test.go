package audit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// rechainFrom relinks every row from seq `from` to the end (the database
// regenerates each hash): what a careful attacker with superuser rights does
// after changing a row, so that the chain is consistent again and only an
// anchor kept outside the database can show the change.
const rechainFrom = `DO $$
DECLARE
    r record;
    prev bytea;
BEGIN
    SELECT hash INTO prev FROM expiryctl.audit_log WHERE seq = %[1]d - 1;
    IF prev IS NULL THEN prev := '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea; END IF;
    FOR r IN SELECT * FROM expiryctl.audit_log WHERE seq >= %[1]d ORDER BY seq LOOP
        UPDATE expiryctl.audit_log SET prev_hash = prev WHERE seq = r.seq
        RETURNING hash INTO prev;
    END LOOP;
END $$`

// dropHashGeneration turns the generated hash into a plain column, which the
// table's owner can do: after it, a changed row keeps its old hash.
const dropHashGeneration = `ALTER TABLE expiryctl.audit_log ALTER COLUMN hash DROP EXPRESSION`

// TestVerifyDBCatchesTampering tampers with a 50-row trail the ways a
// superuser can, behind the append-only triggers, and checks that VerifyDB
// names the right first bad seq and problem.
func TestVerifyDBCatchesTampering(t *testing.T) {
	t.Parallel()
	const n = 50
	cases := []struct {
		name       string
		tamper     []string
		from       int64
		useAnchor  bool // verify against the anchor taken before tampering
		wantSeq    int64
		wantProbem audit.Problem
	}{
		// The database regenerates the hash of a changed row, so an edit
		// shows as the next row's broken link.
		{name: "edit a field", tamper: []string{`UPDATE expiryctl.audit_log SET actor = 'mallory' WHERE seq = 20`},
			wantSeq: 21, wantProbem: audit.BrokenLink},
		{name: "edit details", tamper: []string{`UPDATE expiryctl.audit_log SET details = details || '{"x": 1}' WHERE seq = 33`},
			wantSeq: 34, wantProbem: audit.BrokenLink},
		{name: "edit the time by a microsecond", tamper: []string{`UPDATE expiryctl.audit_log SET at = at + interval '1 microsecond' WHERE seq = 7`},
			wantSeq: 8, wantProbem: audit.BrokenLink},
		{name: "edit the last row", tamper: []string{`UPDATE expiryctl.audit_log SET outcome = 'refused' WHERE seq = 50`},
			useAnchor: true, wantSeq: n, wantProbem: audit.AnchorMismatch},
		{name: "edit a field after dropping the hash's generation", tamper: []string{dropHashGeneration,
			`UPDATE expiryctl.audit_log SET actor = 'mallory' WHERE seq = 20`},
			wantSeq: 20, wantProbem: audit.HashMismatch},
		{name: "made-up hash after dropping the hash's generation", tamper: []string{dropHashGeneration,
			`UPDATE expiryctl.audit_log SET hash = sha256('forged') WHERE seq = 12`},
			wantSeq: 12, wantProbem: audit.HashMismatch},
		{name: "delete a middle row", tamper: []string{`DELETE FROM expiryctl.audit_log WHERE seq = 20`},
			wantSeq: 20, wantProbem: audit.Gap},
		{name: "delete the first row", tamper: []string{`DELETE FROM expiryctl.audit_log WHERE seq = 1`},
			wantSeq: 1, wantProbem: audit.Gap},
		{name: "delete the tail", tamper: []string{`DELETE FROM expiryctl.audit_log WHERE seq > 45`},
			useAnchor: true, wantSeq: n, wantProbem: audit.AnchorMissing},
		{name: "swap two rows' seq", tamper: []string{`UPDATE expiryctl.audit_log SET seq = -20 WHERE seq = 20`,
			`UPDATE expiryctl.audit_log SET seq = 20 WHERE seq = 21`, `UPDATE expiryctl.audit_log SET seq = 21 WHERE seq = -20`},
			wantSeq: 20, wantProbem: audit.BrokenLink},
		{name: "swap two rows' contents", tamper: []string{`UPDATE expiryctl.audit_log a
			SET actor = b.actor, action = b.action, target = b.target, details = b.details, at = b.at
			FROM expiryctl.audit_log b WHERE (a.seq, b.seq) IN ((30, 31), (31, 30))`},
			wantSeq: 31, wantProbem: audit.BrokenLink},
		{name: "forged row linked to nothing", tamper: []string{`INSERT INTO expiryctl.audit_log
			(seq, at, actor, db_role, action, target, details, outcome, prev_hash)
			VALUES (51, now(), 'mallory', 'root', 'dlq.show', 'dead_letter:1', '{}', 'ok', sha256('forged'))`},
			wantSeq: 51, wantProbem: audit.BrokenLink},
		{name: "forged duplicate of a middle row", tamper: []string{
			`ALTER TABLE expiryctl.audit_log DROP CONSTRAINT audit_log_pkey`,
			`INSERT INTO expiryctl.audit_log (seq, at, actor, db_role, action, target, details, outcome, prev_hash)
			 SELECT seq, at, 'mallory', db_role, action, target, details, outcome, prev_hash
			 FROM expiryctl.audit_log WHERE seq = 25`},
			wantSeq: 25, wantProbem: audit.DuplicateSeq},
		{name: "row inserted in the middle, later seqs shifted and re-chained", tamper: []string{
			`UPDATE expiryctl.audit_log SET seq = -seq WHERE seq >= 40`,
			`UPDATE expiryctl.audit_log SET seq = -seq + 1 WHERE seq <= -40`,
			`INSERT INTO expiryctl.audit_log (seq, at, actor, db_role, action, target, details, outcome, prev_hash)
			 SELECT 40, at, 'mallory', 'root', 'replay.approve', 'replay_request:9', '{}', 'ok', '\x00'
			 FROM expiryctl.audit_log WHERE seq = 39`,
			fmt.Sprintf(rechainFrom, 40)},
			useAnchor: true, wantSeq: n, wantProbem: audit.AnchorMismatch},
		{name: "edit re-chained to the end: only the anchor sees it", tamper: []string{
			`UPDATE expiryctl.audit_log SET target = 'dead_letter:666' WHERE seq = 10`, fmt.Sprintf(rechainFrom, 10)},
			useAnchor: true, wantSeq: n, wantProbem: audit.AnchorMismatch},
		{name: "from: the link row is gone", tamper: []string{`DELETE FROM expiryctl.audit_log WHERE seq = 29`},
			from: 30, wantSeq: 29, wantProbem: audit.Gap},
		{name: "from: a changed row after it", tamper: []string{`UPDATE expiryctl.audit_log SET action = 'x' WHERE seq = 31`},
			from: 30, wantSeq: 32, wantProbem: audit.BrokenLink},
		{name: "from: a changed row before it breaks the first link", tamper: []string{`UPDATE expiryctl.audit_log SET outcome = 'x' WHERE seq = 29`},
			from: 30, wantSeq: 30, wantProbem: audit.BrokenLink},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db, head := newTrail(t, n)
			ctx := context.Background()
			if _, err := audit.VerifyDB(ctx, db.Pool, c.from, &head); err != nil {
				t.Fatalf("before tampering: %v", err)
			}
			for _, sql := range c.tamper {
				tamper(t, db.Pool, sql)
			}
			var anchor *audit.Anchor
			if c.useAnchor {
				anchor = &head
				if _, err := audit.VerifyDB(ctx, db.Pool, c.from, nil); err != nil {
					t.Fatalf("without the anchor the tampering should go unseen, but: %v", err)
				}
			}
			res, err := audit.VerifyDB(ctx, db.Pool, c.from, anchor)
			var chainErr *audit.ChainError
			if !errors.As(err, &chainErr) {
				t.Fatalf("VerifyDB = %+v, %v; want a *ChainError", res, err)
			}
			if chainErr.Seq != c.wantSeq || chainErr.Problem != c.wantProbem {
				t.Fatalf("first bad seq %d (%s), want %d (%s): %v", chainErr.Seq, chainErr.Problem, c.wantSeq, c.wantProbem, err)
			}
			if res.Rows != chainErr.Verified {
				t.Errorf("result says %d rows verified, the error %d", res.Rows, chainErr.Verified)
			}
			t.Log(err)
		})
	}
}

func TestVerifyDBIntact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	res, err := audit.VerifyDB(ctx, db.Pool, 0, nil)
	if err != nil || res.Rows != 0 {
		t.Fatalf("empty trail: %+v, %v", res, err)
	}
	head := seedChain(t, db.Pool, 30)
	// Rows written by the trigger continue the seeded chain.
	for i := 0; i < 5; i++ {
		if err := audit.Record(ctx, db.Pool, audit.Entry{Actor: "t", Action: "dlq.list", Details: map[string]int{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	res, err = audit.VerifyDB(ctx, db.Pool, 0, &head)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 35 || res.From != 1 || res.Head.Seq != 35 {
		t.Fatalf("result %+v, want 35 rows from 1 to 35", res)
	}
	res, err = audit.VerifyDB(ctx, db.Pool, 31, &head)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 5 || res.From != 31 {
		t.Fatalf("from 31: %+v, want 5 rows from 31", res)
	}
	if _, err := audit.VerifyDB(ctx, db.Pool, 37, nil); err == nil || !strings.Contains(err.Error(), "past the end") {
		t.Fatalf("from past the head: %v", err)
	}
	wrong := head
	wrong.Hash[0] ^= 1
	var chainErr *audit.ChainError
	if _, err := audit.VerifyDB(ctx, db.Pool, 0, &wrong); !errors.As(err, &chainErr) || chainErr.Problem != audit.AnchorMismatch {
		t.Fatalf("a wrong anchor: %v", err)
	}
	beyond := audit.Anchor{Seq: 99, Hash: head.Hash}
	if _, err := audit.VerifyDB(ctx, db.Pool, 0, &beyond); !errors.As(err, &chainErr) || chainErr.Problem != audit.AnchorMissing || chainErr.Seq != 99 {
		t.Fatalf("an anchor past the end: %v", err)
	}
}

// TestAppendOnly checks that ordinary statements cannot change the trail,
// also from a session in replica mode, and that the database, not the
// client, sets time, role and hash.
func TestAppendOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := newTrail(t, 10)
	for _, replica := range []bool{false, true} {
		conn, err := db.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if replica {
			if _, err := conn.Exec(ctx, `SET session_replication_role = replica`); err != nil {
				t.Fatal(err)
			}
		}
		for _, sql := range []string{
			`UPDATE expiryctl.audit_log SET actor = 'mallory' WHERE seq = 3`,
			`DELETE FROM expiryctl.audit_log WHERE seq = 3`,
			`TRUNCATE expiryctl.audit_log`,
		} {
			_, err := conn.Exec(ctx, sql)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "42501" || !strings.Contains(pgErr.Message, "expiryctl.audit_log is append-only") {
				t.Errorf("%s (replica %v) = %v, want the append-only refusal", sql, replica, err)
			}
		}
		// A client cannot name the hash, another role or another time,
		// nor take a seq that is already there.
		for _, forge := range []struct{ sql, code string }{
			{`INSERT INTO expiryctl.audit_log (actor, action, outcome, hash) VALUES ('x', 'test.forge', 'ok', '\x00')`, "428C9"},
			{`INSERT INTO expiryctl.audit_log (actor, db_role, action, outcome) VALUES ('x', 'someone_else', 'test.forge', 'ok')`, "42501"},
			{`INSERT INTO expiryctl.audit_log (at, actor, action, outcome) VALUES ('2000-01-01', 'x', 'test.forge', 'ok')`, "42501"},
			{`INSERT INTO expiryctl.audit_log (seq, actor, action, outcome) VALUES (1, 'x', 'test.forge', 'ok')`, "23505"},
		} {
			_, err := conn.Exec(ctx, forge.sql)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != forge.code {
				t.Errorf("%s (replica %v) = %v, want SQLSTATE %s", forge.sql, replica, err, forge.code)
			}
		}
		var seq int64
		var role string
		var prev, hash []byte
		err = conn.QueryRow(ctx, `INSERT INTO expiryctl.audit_log (actor, action, outcome) VALUES ('x', 'test.plain', 'ok')
			RETURNING seq, db_role, prev_hash, hash`).Scan(&seq, &role, &prev, &hash)
		if err != nil {
			t.Fatal(err)
		}
		if seq <= 10 || role != "postgres" || len(prev) != 32 || len(hash) != 32 {
			t.Errorf("a plain insert got seq %d, role %q, %d/%d-byte hashes", seq, role, len(prev), len(hash))
		}
		if replica {
			_, _ = conn.Exec(ctx, `RESET session_replication_role`)
		}
		conn.Release()
	}
	if _, err := audit.VerifyDB(ctx, db.Pool, 0, nil); err != nil {
		t.Fatal(err)
	}
}

// TestLeastPrivilegeWriter checks that a login in an expiryctl group (here
// the auditor's) appends rows through the schema's audit_append function, is
// recorded as db_role, and can neither insert, change nor remove a row
// itself, nor name the columns the database fills in.
func TestLeastPrivilegeWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := newTrail(t, 5)
	login := db.Login(t, "carol", "expiryctl_auditor")
	writer, role := login.Pool, login.Name
	for i := 0; i < 3; i++ {
		if err := audit.Record(ctx, writer, audit.Entry{Actor: "carol", Action: "dlq.show", Target: "dead_letter:3"}); err != nil {
			t.Fatalf("a least-privilege role cannot append: %v", err)
		}
	}
	for _, sql := range []string{
		`INSERT INTO expiryctl.audit_log (actor, action, outcome) VALUES ('carol', 'test.forge', 'ok')`,
		`INSERT INTO expiryctl.audit_log (seq, actor, action, outcome) VALUES (99, 'carol', 'test.forge', 'ok')`,
		`INSERT INTO expiryctl.audit_log (actor, action, outcome, prev_hash) VALUES ('carol', 'test.forge', 'ok', '\x00')`,
		`UPDATE expiryctl.audit_log SET actor = 'x' WHERE seq = 2`,
		`DELETE FROM expiryctl.audit_log WHERE seq = 2`,
		`ALTER TABLE expiryctl.audit_log DISABLE TRIGGER ALL`,
	} {
		if _, err := writer.Exec(ctx, sql); err == nil {
			t.Errorf("%s: allowed to a writer", sql)
		}
	}
	res, err := audit.VerifyDB(ctx, db.Pool, 0, nil)
	if err != nil || res.Rows != 8 {
		t.Fatalf("after the writer: %+v, %v", res, err)
	}
	page, err := audit.List(ctx, db.Pool, audit.Filter{Actor: "carol"}, nil, 10)
	if err != nil || len(page.Rows) != 3 || page.Rows[0].DBRole != role {
		t.Fatalf("the writer's rows: %+v, %v", page.Rows, err)
	}
}

// TestConcurrentWritersFormOneChain has 8 writers append 500 rows each on
// the shared pool, some inside transactions with other work, and checks the
// result is one unbroken chain 1..4000.
func TestConcurrentWritersFormOneChain(t *testing.T) {
	t.Parallel()
	const writers, each = 8, 500
	ctx := context.Background()
	db := pgtest.New(t)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				e := audit.Entry{Actor: fmt.Sprintf("writer-%d", w), Action: "dlq.show", Target: fmt.Sprintf("n:%d", i),
					Details: map[string]any{"writer": w, "i": i, "text": "ünïcødé \"quoted\"\n"}}
				var err error
				if i%5 == 0 {
					tx, txErr := db.Pool.Begin(ctx)
					if txErr != nil {
						errs <- txErr
						return
					}
					if _, err = tx.Exec(ctx, `SELECT pg_sleep(0.001)`); err == nil {
						err = audit.Record(ctx, tx, e)
					}
					if err == nil {
						err = tx.Commit(ctx)
					} else {
						_ = tx.Rollback(ctx)
					}
				} else {
					err = audit.Record(ctx, db.Pool, e)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	res, err := audit.VerifyDB(ctx, db.Pool, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != writers*each || res.Head.Seq != writers*each {
		t.Fatalf("verified %+v, want %d rows ending at seq %d", res, writers*each, writers*each)
	}
}

// TestVerifyFileCatchesTampering edits exports the way someone holding the
// file could, and checks VerifyFile names the right first bad seq.
func TestVerifyFileCatchesTampering(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, head := newTrail(t, 40)
	exports := map[audit.Format][]byte{}
	for _, f := range audit.Formats() {
		var buf bytes.Buffer
		if _, err := audit.Export(ctx, db.Pool, &buf, f, audit.Filter{}); err != nil {
			t.Fatal(err)
		}
		exports[f] = buf.Bytes()
	}
	// Lines are rows in every format: line i+1 holds seq i (after the CSV
	// header or the JSON array's "[").
	type edit func(lines []string) []string
	cases := []struct {
		name      string
		edit      edit
		anchor    bool
		allowGaps bool
		wantSeq   int64
		want      audit.Problem
	}{
		{name: "edit a field", edit: func(l []string) []string {
			l[12] = strings.Replace(l[12], "dlq.", "dlQ.", 1)
			return l
		}, wantSeq: 12, want: audit.HashMismatch},
		{name: "delete a middle row", edit: func(l []string) []string { return append(l[:20:20], l[21:]...) },
			wantSeq: 20, want: audit.Gap},
		{name: "delete the tail, caught by the anchor", edit: func(l []string) []string { return dropRows(l, 36, 40) },
			anchor: true, wantSeq: 40, want: audit.AnchorMissing},
		{name: "swap two rows", edit: func(l []string) []string { l[15], l[16] = l[16], l[15]; return l },
			wantSeq: 15, want: audit.OutOfOrder},
		{name: "swap two rows, gaps allowed", edit: func(l []string) []string { l[15], l[16] = l[16], l[15]; return l },
			allowGaps: true, wantSeq: 15, want: audit.OutOfOrder},
		{name: "duplicate a row", edit: func(l []string) []string {
			return append(l[:9:9], append([]string{l[8]}, l[9:]...)...)
		}, wantSeq: 8, want: audit.DuplicateSeq},
		{name: "change a hash", edit: func(l []string) []string {
			l[5] = strings.Replace(l[5], lastHex(l[5]), strings.Repeat("0", 64), 1)
			return l
		}, wantSeq: 5, want: audit.HashMismatch},
	}
	for _, format := range audit.Formats() {
		for _, c := range cases {
			t.Run(string(format)+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				lines := strings.Split(string(exports[format]), "\n")
				if format == audit.NDJSON {
					// A blank first line (which the reader skips) puts seq i
					// on line i, as the header or "[" does in the others.
					lines = append([]string{""}, lines...)
				}
				lines = c.edit(append([]string(nil), lines...))
				if format == audit.JSON {
					fixJSONCommas(lines)
				}
				opts := audit.VerifyOptions{AllowGaps: c.allowGaps}
				if c.anchor {
					opts.Anchor = &head
				}
				_, err := audit.VerifyFile(ctx, strings.NewReader(strings.Join(lines, "\n")), "export."+string(format), opts)
				var chainErr *audit.ChainError
				if !errors.As(err, &chainErr) {
					t.Fatalf("VerifyFile = %v, want a *ChainError", err)
				}
				if chainErr.Seq != c.wantSeq || chainErr.Problem != c.want {
					t.Fatalf("first bad seq %d (%s), want %d (%s): %v", chainErr.Seq, chainErr.Problem, c.wantSeq, c.want, err)
				}
			})
		}
	}
}

// dropRows removes the lines of seqs from..to (inclusive).
func dropRows(l []string, from, to int) []string {
	return append(l[:from:from], l[to+1:]...)
}

func lastHex(line string) string {
	line = strings.TrimRight(line, `"},`)
	return line[len(line)-64:]
}

// fixJSONCommas keeps an edited JSON array well-formed: every element line
// but the last ends with a comma.
func fixJSONCommas(lines []string) {
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "{") {
			lines[i] = strings.TrimSuffix(l, ",")
			last = i
		}
	}
	for i, l := range lines {
		if strings.HasPrefix(l, "{") && i != last {
			lines[i] = l + ","
		}
	}
}

// TestMultiRowInsertChains checks that one INSERT of several rows chains them
// in order: each row's defaults see the rows the statement inserted before it.
func TestMultiRowInsertChains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := newTrail(t, 3)
	rows, err := db.Pool.Query(ctx, `INSERT INTO expiryctl.audit_log (actor, action, outcome)
		SELECT 'bulk', 'test.bulk-' || g, 'ok' FROM generate_series(1, 5) g RETURNING seq`)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	if rows.Err() != nil || fmt.Sprint(seqs) != "[4 5 6 7 8]" {
		t.Fatalf("one INSERT of five rows got seqs %v (%v), want 4 to 8", seqs, rows.Err())
	}
	if res, err := audit.VerifyDB(ctx, db.Pool, 0, nil); err != nil || res.Rows != 8 {
		t.Fatalf("verify: %+v, %v", res, err)
	}
}
