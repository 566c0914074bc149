package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// Terminal control sequences a hostile or broken producer can put in a
// letter. Printed raw, they clear the screen, retitle the window, move the
// cursor over earlier output or, as an 8-bit CSI, do the same on terminals
// that honour C1 controls.
const (
	clearScreen = "\x1b[2J"
	setTitle    = "\x1b]0;pwned\x07"
	moveCursor  = "\x1b[10;10H"
	csi8bit     = "\xc2\x9b"
)

// hostileCase is one letter and what the archive and `dlq show` must make
// of it.
type hostileCase struct {
	name     string
	letter   amqp.Publishing
	category string
	// shows are texts the table view must contain: the escaped forms of
	// what the letter carried. Stored text fields hold NUL and invalid UTF-8
	// already escaped (deadletter.SafeText), which the view escapes again, so
	// those checks look only for the visible tail of the escape.
	shows []string
}

func hostileCases() []hostileCase {
	jobBody := newJob(7).body()
	binary := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range binary {
		binary[i] = byte(rng.IntN(256))
	}
	// Every byte value, so that the hex view is tried on ESC, BEL, NUL and
	// the C1 range whatever the random part holds.
	for i := range 256 {
		binary[i] = byte(i)
	}
	huge := []byte(clearScreen + strings.Repeat("A", 2<<20) + setTitle)

	withID := func(m amqp.Publishing, id string) amqp.Publishing { m.MessageId = id; return m }
	return []hostileCase{
		{
			name: "escapes in a text payload",
			// Mostly text, so show escapes it in place; a payload of mostly
			// control bytes is hex-dumped instead (see "binary payload").
			letter: rawLetter("text-escapes",
				[]byte(clearScreen+moveCursor+"expiry worker crashed on reservation r-9, see its logs for the stack trace"+setTitle),
				amqp.Table{"x-error-class": "db_timeout"}),
			category: "malformed",
			shows:    []string{`\x1b[2J`, `\x1b[10;10H`, `\x1b]0;pwned\x07`},
		},
		{
			name: "escapes in headers and message id",
			letter: withID(rawLetter("header-escapes", jobBody, amqp.Table{
				"x-error-class":       "db_timeout",
				"x-last-error":        setTitle + clearScreen + "connection lost",
				"x-original-exchange": moveCursor + "reservations",
			}), "letter-id-"+clearScreen),
			category: "transient-exhausted",
			shows:    []string{`\x1b]0;pwned\x07\x1b[2Jconnection lost`, `letter-id-\x1b[2J`, `\x1b[10;10Hreservations`},
		},
		{
			name: "8-bit CSI in JSON fields",
			letter: withID(rawLetter("c1",
				[]byte(`{"reservation_id":"r-`+csi8bit+`31m","idempotency_key":"expire:`+csi8bit+`2J","expected_version":1}`),
				amqp.Table{"x-error-class": "not_found"}), "letter-c1-"+csi8bit+"2J"),
			category: "not-found",
			shows:    []string{`r-\u009b31m`, `letter-c1-\u009b2J`},
		},
		{
			name: "JSON-escaped controls in fields",
			letter: rawLetter("json-escaped",
				[]byte(`{"reservation_id":"r-\u001b[10;10H","idempotency_key":"k-\u0007\u0000"}`),
				amqp.Table{"x-error-class": "validation"}),
			category: "validation",
			shows:    []string{`r-\x1b[10;10H`, `k-\x07\\x00`},
		},
		{
			name:     "NUL bytes",
			letter:   rawLetter("nul", []byte("{\"reservation_id\":\"r-\x00\"}"), amqp.Table{"x-last-error": "before\x00after"}),
			category: "malformed",
			shows:    []string{`x00after`, "00 22 7d"},
		},
		{
			name:     "invalid UTF-8",
			letter:   rawLetter("invalid-utf8", []byte("\xff\xfe{\"reservation_id\":\"r-5\"}"), amqp.Table{"x-error-class": "\xff\xfevalidation"}),
			category: "malformed",
			shows:    []string{"ff fe 7b", `xff`, `xfevalidation`},
		},
		{
			name:     "2 MiB payload",
			letter:   rawLetter("huge", huge, nil),
			category: "malformed",
			shows:    []string{`\x1b[2J`, "truncated", fmt.Sprintf("of %d bytes", len(huge))},
		},
		{
			name:     "empty payload",
			letter:   rawLetter("empty", []byte{}, nil),
			category: "malformed",
			shows:    []string{"(empty)", "unreadable body   empty body"},
		},
		{
			name:     "binary payload",
			letter:   rawLetter("binary", binary, amqp.Table{"x-error-class": "decode"}),
			category: "malformed",
			shows: []string{"00000000  00 01 02 03 04 05 06 07  08 09 0a 0b 0c 0d 0e 0f  |................|",
				"unreadable body   body is not JSON: 4096 bytes of binary data"},
		},
		{
			name: "headers of unexpected types",
			letter: rawLetter("odd-types", jobBody, amqp.Table{
				"x-death":           "rejected" + clearScreen,
				"x-error-class":     int32(42),
				"x-attempt-history": amqp.Table{"at": setTitle, "error_class": "db_timeout"},
				"x-delivery-count":  "many",
			}),
			category: "unknown",
			shows:    []string{"x-error-class: 42", `at="\x1b]0;pwned\x07"`, `x-death: "rejected\x1b[2J"`},
		},
	}
}

// TestHostileInput captures letters built to break a parser or take over
// the operator's terminal. Each must be stored byte for byte, classified,
// and shown with every control character escaped.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	r := newRabbit(t)
	dlq := r.queue(t, ".dlq", nil)
	c := newCLI(db.URL, "e2e-hostile")
	cases := hostileCases()
	for _, tc := range cases {
		r.publish(t, dlq, tc.letter)
	}

	res := c.ok(t, "dlq", "ingest", "--queue", dlq)
	assertClean(t, "dlq ingest stderr", res.stderr)
	if left := r.settled(t, dlq); left != 0 {
		t.Fatalf("%d hostile letters left in the queue: capture must never refuse a letter", left)
	}
	if n := rows(t, db.Pool); n != len(cases) {
		t.Fatalf("%d rows archived, want %d", n, len(cases))
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var (
				id       int64
				payload  []byte
				category string
			)
			err := db.Pool.QueryRow(withTimeout(t), `SELECT id, payload, reason_category FROM expiryctl.dead_letters
				WHERE headers->>'x-test-letter' = $1`, tc.letter.Headers["x-test-letter"]).Scan(&id, &payload, &category)
			if err != nil {
				t.Fatalf("find the archived letter: %v", err)
			}
			if !bytes.Equal(payload, tc.letter.Body) {
				t.Errorf("payload stored as %d bytes differing from the %d sent", len(payload), len(tc.letter.Body))
			}
			if category != tc.category {
				t.Errorf("category = %s, want %s", category, tc.category)
			}

			show := c.ok(t, "dlq", "show", strconv.FormatInt(id, 10))
			assertClean(t, "dlq show stdout", show.stdout)
			assertClean(t, "dlq show stderr", show.stderr)
			for _, s := range tc.shows {
				if !strings.Contains(show.stdout, s) {
					t.Errorf("dlq show should contain %q: %s", s, show)
				}
			}

			// JSON is for programs: it must carry the exact bytes back.
			asJSON := c.ok(t, "dlq", "show", strconv.FormatInt(id, 10), "-o", "json")
			var detail struct {
				Payload []byte `json:"payload"`
			}
			if err := json.Unmarshal([]byte(asJSON.stdout), &detail); err != nil {
				t.Fatalf("dlq show -o json: %v", err)
			}
			if !bytes.Equal(detail.Payload, tc.letter.Body) {
				t.Errorf("dlq show -o json gives a payload of %d bytes differing from the %d sent", len(detail.Payload), len(tc.letter.Body))
			}
		})
	}

	t.Run("list and summary", func(t *testing.T) {
		t.Parallel()
		list := c.ok(t, "dlq", "list")
		assertClean(t, "dlq list stdout", list.stdout)
		assertClean(t, "dlq list stderr", list.stderr)
		if ids := tableIDs(t, list); len(ids) != len(cases) {
			t.Errorf("dlq list shows %d letters, want %d", len(ids), len(cases))
		}
		for _, s := range []string{`letter-id-\x1b[2J`, `letter-c1-\u009b2J`, `r-\x1b[10;10H`} {
			if !strings.Contains(list.stdout, s) {
				t.Errorf("dlq list should contain %q: %s", s, list)
			}
		}
		summary := c.ok(t, "dlq", "summary")
		assertClean(t, "dlq summary stdout", summary.stdout)
	})
}

// assertClean fails unless s is valid UTF-8 without a control character
// other than newline and tab: no ESC, BEL or NUL, no C1 control, nothing a
// terminal would act on.
func assertClean(t testing.TB, what, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Errorf("%s is not valid UTF-8", what)
	}
	for i, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			t.Errorf("%s holds control character %U at byte %d: %q", what, r, i, s[max(0, i-40):min(len(s), i+40)])
			return
		}
	}
}
