package e2e_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestTablesFitTheTerminal runs the listings in real terminals (tmux) 80
// and 120 columns wide, over letters and a request whose free text is far
// wider than either: no row wraps (tmux's joined capture has no line wider
// than the pane), and each row still shows its id and status.
func TestTablesFitTheTerminal(t *testing.T) {
	t.Parallel()
	tm := tuiNeedTmux(t)
	db := pgtest.New(t)
	queue := "payments-eu-west-1.reservation-expiry.dead-letter-queue-with-a-long-name"
	class := "upstream_connection_reset_by_peer_while_expiring"
	var letters []deadletter.Letter
	for i := 1; i <= 3; i++ {
		body := newJob(i).body()
		lastError := strings.Repeat("connection reset by peer while expiring the hold ", 5)
		letters = append(letters, deadletter.Letter{
			Fingerprint: sha256.Sum256(fmt.Appendf(nil, "wide-%d", i)), JobKey: fmt.Sprintf("expire:r-%d:v3", i),
			MessageID: fmt.Sprintf("expire:%s:r-%d:v3", queue, i), ReservationID: fmt.Sprintf("r-%d", i),
			IdempotencyKey: fmt.Sprintf("expire:r-%d:v3", i), SourceQueue: queue,
			OriginalExchange: "reservations-with-a-long-exchange-name", OriginalRoutingKey: "reservation.expire.with.a.long.routing.key",
			Category: deadletter.TransientExhausted, ErrorClass: class, LastError: lastError, Attempts: 3,
			Headers:     deadletter.EncodeHeaders(map[string]any{"x-error-class": class, "x-last-error": lastError}),
			ContentType: "application/json", Payload: body, PayloadHash: sha256.Sum256(body),
			DeadLetteredAt: time.Now().Add(-time.Duration(i) * time.Minute),
		})
	}
	ctx := withTimeout(t)
	if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := deadletter.Insert(ctx, tx, letters)
		return err
	}); err != nil {
		t.Fatalf("seed letters: %v", err)
	}
	admin := newCLI(db.URL, "alice.on-call@payments.example")
	why := "INC-4211: the reservations database failed over at 02:58 and every expiry in flight timed out; replaying the cohort after the fix"
	admin.ok(t, "replay", "request", "--reason", "transient-exhausted", "--max", "3", "--via-exchange", "--why", why)

	env := []string{"EXPIRYCTL_DATABASE_URL=" + db.URL, "EXPIRYCTL_AMQP_URL=" + amqptest.URL(),
		"EXPIRYCTL_ACTOR=alice.on-call@payments.example", "TERM=screen-256color", "NO_COLOR=1"}
	commands := [][]string{
		{"dlq", "list"}, {"replay", "list"}, {"replay", "show", "1", "--sample", "3", "--no-pager"}, {"audit", "list", "--limit", "20"},
		{"access", "list"}, {"policy", "show"},
	}
	for _, width := range []int{80, 120} {
		session := fmt.Sprintf("wide%d", width)
		done := filepath.Join(tm.dir, session+".done")
		var script strings.Builder
		for _, args := range commands {
			// stderr (the advisory line of a superuser's connection, the
			// next page's token) is not a table: it goes elsewhere.
			fmt.Fprintf(&script, "echo '$ %s'; %s %s 2>>%s; ", strings.Join(args, " "), shellQuote(binPath),
				strings.Join(quoteAll(args), " "), shellQuote(filepath.Join(tm.dir, session+".stderr")))
		}
		fmt.Fprintf(&script, "touch %s; sleep 600", shellQuote(done))
		tm.run("new-session", "-d", "-s", session, "-x", fmt.Sprint(width), "-y", "50",
			"env "+strings.Join(quoteAll(env), " ")+" sh -c "+shellQuote(script.String()))
		deadline := time.Now().Add(30 * time.Second)
		for !fileExists(done) {
			if time.Now().After(deadline) {
				t.Fatalf("the commands did not finish in the %d-column terminal:\n%s", width, tm.run("capture-pane", "-p", "-t", session))
			}
			time.Sleep(100 * time.Millisecond)
		}
		// -J joins the lines the terminal wrapped: a row that wrapped is
		// one line wider than the pane here.
		screen := tm.run("capture-pane", "-p", "-J", "-S", "-", "-t", session)
		for _, l := range strings.Split(screen, "\n") {
			if n := utf8.RuneCountInString(strings.TrimRight(l, " ")); n > width {
				t.Errorf("at %d columns a line wrapped (%d columns):\n%s", width, n, l)
			}
		}
		wantRows := map[string]*regexp.Regexp{
			"dlq list, letter 1":   regexp.MustCompile(`(?m)^\d+\s+\S.*\s+transient-exhausted\s.*\s+r-1\s+3\s+in_request\b`),
			"replay list":          regexp.MustCompile(`(?m)^1\s+replay\s+pending\s+3\s+`),
			"replay show's cohort": regexp.MustCompile(`(?m)^1\s+\d+\s+transient-exhausted\s.*\spending$`),
			"audit list":           regexp.MustCompile(`(?m)^\d+\s+.*\sreplay\.request\s.*\sok\s`),
			"policy show":          regexp.MustCompile(`(?m)^approval_ttl\s+1h$`),
		}
		for what, re := range wantRows {
			if !re.MatchString(screen) {
				t.Errorf("at %d columns %s lost its key columns:\n%s", width, what, screen)
			}
		}
		if !strings.Contains(screen, "…") {
			t.Errorf("at %d columns no long cell was cut with an ellipsis:\n%s", width, screen)
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
