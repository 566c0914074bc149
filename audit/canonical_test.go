package audit_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// canonicalCase is one row's values, details given as jsonb input: the Go
// side is handed details::text from PostgreSQL, as both verifiers are.
type canonicalCase struct {
	name    string
	seq     int64
	at      string // timestamptz input, always with an explicit offset
	actor   string
	dbRole  string
	action  string
	target  string
	details string
	outcome string
	prev    string // hex; empty for zero
}

func canonicalCases() []canonicalCase {
	big := strings.Builder{}
	big.WriteString(`{"items": [`)
	for i := 0; i < 5000; i++ {
		if i > 0 {
			big.WriteString(", ")
		}
		fmt.Fprintf(&big, `{"id": %d, "error": "dial tcp 10.0.0.%d:5432: i/o timeout \"x\"\n", "ratio": %d.%03d}`, i, i%255, i, i%1000)
	}
	big.WriteString(`]}`)
	return []canonicalCase{
		{name: "plain", seq: 1, at: "2026-11-30T03:00:00.123456Z", actor: "alice", dbRole: "root", action: "dlq.show",
			target: "dead_letter:42", details: `{"payload_size": 312}`, outcome: "ok"},
		{name: "empty strings and empty object", seq: 2, at: "2026-11-30T03:00:00Z", actor: "", dbRole: "", action: "",
			target: "", details: `{}`, outcome: ""},
		{name: "unicode", seq: 3, at: "2026-11-30T03:00:00.000001+05:45", actor: "Zoë 👩🏽‍💻 عربي",
			dbRole: "rôle", action: "dlq.list", target: "queue:réservation", details: `{"why": "naïve \u00e9 — 漢字 \ud83d\ude00", "e": "é"}`,
			outcome: "ok"},
		{name: "escapes in text and json", seq: 4, at: "1999-12-31T23:59:59.999999-08:00", actor: "a,b\"c\r\nd\te\\f",
			dbRole: "root", action: "x", target: "t\u2028u", details: `{"s": "tab\there \"q\" back\\slash nl\n ctl\u0001 del\u007f"}`,
			outcome: "refused"},
		{name: "numbers as jsonb prints them", seq: 5, at: "2026-03-29T01:59:59.999999+00:00", actor: "n", dbRole: "r", action: "a",
			target: "", details: `{"f": 1.50, "e": 1e3, "big": 123456789012345678901234567890.000001, "neg": -0.0, "small": 1e-7}`,
			outcome: "ok"},
		{name: "before the unix epoch", seq: 6, at: "1969-07-20T20:17:40.5Z", actor: "armstrong", dbRole: "nasa",
			action: "moon.land", target: "", details: `[1, "two", null, true]`, outcome: "ok"},
		{name: "big jsonb", seq: 123456789012, at: "2026-11-30T03:00:00.654321Z", actor: "bulk", dbRole: "root",
			action: "dlq.ingest", target: "queue:q", details: big.String(), outcome: "error",
			prev: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
	}
}

// sessionSettings are settings that change how PostgreSQL prints times,
// dates and numbers. None of them may change a row's hash.
var sessionSettings = []string{
	"",
	"SET TimeZone = 'Pacific/Chatham'; SET DateStyle = 'SQL, DMY'; SET extra_float_digits = 3",
	"SET TimeZone = 'America/St_Johns'; SET DateStyle = 'German'; SET extra_float_digits = -15; SET IntervalStyle = 'sql_standard'",
	"SET TimeZone = '-11'; SET DateStyle = 'Postgres, MDY'; SET lc_numeric = 'C'; SET bytea_output = 'escape'",
}

// TestCanonicalMatchesPostgres checks the Go encoding byte for byte against
// expiryctl.audit_canonical, for tricky values, under session settings that
// change how PostgreSQL prints times and numbers.
func TestCanonicalMatchesPostgres(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	for _, settings := range sessionSettings {
		conn, err := pgx.Connect(ctx, db.URL)
		if err != nil {
			t.Fatal(err)
		}
		if settings != "" {
			if _, err := conn.Exec(ctx, settings); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range canonicalCases() {
			prev := audit.ZeroHash
			if c.prev != "" {
				var err error
				if prev, err = audit.ParseHash(c.prev); err != nil {
					t.Fatal(err)
				}
			}
			var (
				pgCanonical, pgHash []byte
				detailsText         string
			)
			err := conn.QueryRow(ctx, `SELECT expiryctl.audit_canonical($1, $2::timestamptz, $3, $4, $5, $6, $7::jsonb, $8, $9),
				sha256(expiryctl.audit_canonical($1, $2::timestamptz, $3, $4, $5, $6, $7::jsonb, $8, $9)), $7::jsonb::text`,
				c.seq, c.at, c.actor, c.dbRole, c.action, c.target, c.details, c.outcome, prev[:]).Scan(&pgCanonical, &pgHash, &detailsText)
			if err != nil {
				t.Fatalf("%s [%s]: %v", c.name, settings, err)
			}
			at, err := time.Parse(time.RFC3339Nano, c.at)
			if err != nil {
				t.Fatal(err)
			}
			f := audit.ChainFields{Seq: c.seq, AtMicros: at.UnixMicro(), Actor: c.actor, DBRole: c.dbRole, Action: c.action,
				Target: c.target, Details: detailsText, Outcome: c.outcome, PrevHash: prev}
			goCanonical := f.AppendCanonical(nil)
			if string(goCanonical) != string(pgCanonical) {
				t.Errorf("%s [%s]: canonical bytes differ\n go: %s\n pg: %s", c.name, settings,
					clipHex(goCanonical), clipHex(pgCanonical))
			}
			if h := f.ComputeHash(); string(h[:]) != string(pgHash) {
				t.Errorf("%s [%s]: hash %s, PostgreSQL's %x", c.name, settings, h, pgHash)
			}
		}
		conn.Close(ctx)
	}
}

// TestHashIgnoresSessionSettings writes rows through the trigger from
// sessions with different settings and checks that the Go verifier, reading
// from yet another session, agrees with every stored hash.
func TestHashIgnoresSessionSettings(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	for i, settings := range sessionSettings {
		conn, err := pgx.Connect(ctx, db.URL)
		if err != nil {
			t.Fatal(err)
		}
		if settings != "" {
			if _, err := conn.Exec(ctx, settings); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range canonicalCases() {
			err := recordAsTheDatabase(ctx, conn, audit.Entry{Actor: c.actor, Action: c.action, Target: c.target,
				Details: rawJSON(c.details), Outcome: audit.Outcome(c.outcome)})
			if err != nil {
				t.Fatalf("%s [session %d]: %v", c.name, i, err)
			}
		}
		conn.Close(ctx)
	}
	// The verifier's own session prints times and bytes differently again.
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"TimeZone": "Asia/Kathmandu", "DateStyle": "German", "extra_float_digits": "-15",
		"bytea_output": "escape", "IntervalStyle": "iso_8601"} {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	res, err := audit.VerifyDB(ctx, pool, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(sessionSettings) * len(canonicalCases())); res.Rows != want {
		t.Fatalf("verified %d rows, want %d", res.Rows, want)
	}
	page, err := audit.List(ctx, pool, audit.Filter{}, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range page.Rows {
		f := r.Fields()
		if h := f.ComputeHash(); h != r.Hash {
			t.Errorf("seq %d: Row.Fields hashes to %s, stored %s", r.Seq, h, r.Hash)
		}
	}
}

// rawJSON passes a JSON text to Record unchanged.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func clipHex(b []byte) string {
	s := hex.EncodeToString(b)
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}

// TestWorkedExample pins the worked example in docs/audit.md (a real row,
// seq 2 of a fresh database), so the document cannot drift from the code.
func TestWorkedExample(t *testing.T) {
	t.Parallel()
	prev, err := audit.ParseHash("a5737606e1cc4f9c61e63f064c33bcbf1a14f29fe8ae4f758fc79479bde192d4")
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339Nano, "2026-11-30T14:59:40.360893Z")
	if err != nil {
		t.Fatal(err)
	}
	f := audit.ChainFields{
		Seq:      2,
		AtMicros: at.UnixMicro(),
		Actor:    "alice",
		DBRole:   "postgres",
		Action:   "dlq.summary",
		Target:   "",
		Details:  `{"waiting": 0, "categories": 0}`,
		Outcome:  "ok",
		PrevHash: prev,
	}
	const wantCanonical = "0000000000000002" + "0006617fa8c310bd" +
		"00000005" + "616c696365" +
		"00000008" + "706f737467726573" +
		"0000000b" + "646c712e73756d6d617279" +
		"00000000" +
		"0000001f" + "7b2277616974696e67223a20302c202263617465676f72696573223a20307d" +
		"00000002" + "6f6b" +
		"a5737606e1cc4f9c61e63f064c33bcbf1a14f29fe8ae4f758fc79479bde192d4"
	if got := hex.EncodeToString(f.AppendCanonical(nil)); got != wantCanonical {
		t.Fatalf("canonical bytes\n got %s\nwant %s", got, wantCanonical)
	}
	const wantHash = "bd4244b0539803e1fb6ee22e45881b8b21c397707f67b8ebe15108a410df5c24"
	if got := f.ComputeHash().String(); got != wantHash {
		t.Fatalf("hash %s, want %s", got, wantHash)
	}
}
