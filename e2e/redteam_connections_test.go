package e2e_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// decoy is a server of an attacker's: it accepts connections and records
// the first bytes each sends (a Redis AUTH, a PostgreSQL startup packet
// with its login), and never answers.
type decoy struct {
	ln       net.Listener
	accepted atomic.Int64
	mu       sync.Mutex
	heard    []string
}

func newDecoy(t *testing.T) *decoy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &decoy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d.accepted.Add(1)
			go func() {
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				buf := make([]byte, 4096)
				n, _ := c.Read(buf)
				d.mu.Lock()
				d.heard = append(d.heard, string(buf[:n]))
				d.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return d
}

func (d *decoy) addr() string { return d.ln.Addr().String() }

func (d *decoy) port() int { return d.ln.Addr().(*net.TCPAddr).Port }

// TestRedTeamALetterDialsNothing is issue 54's attack, tried again: an
// ingester (the lowest group) stores letters with raw SQL that name a
// server of theirs, hoping that an approver's `replay show`, a dry run or
// the run itself logs in there with the approver's Redis or River
// password. A letter that names a server is refused by the archive; one
// that names a connection the operator has not configured is shown, and
// every command that would connect for it refuses by name, before it
// dials. Neither decoy is ever connected to, and no password is printed.
func TestRedTeamALetterDialsNothing(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t)
	redis, postgres := newDecoy(t), newDecoy(t)
	db := pgtest.New(t)
	setPolicy(t, db, "canary_window=300ms")
	ingesterLogin := db.Login(t, "ingester", "expiryctl_ingester")

	// The operator's configuration names only the operator's servers.
	cfg := configFile(t, map[string]connection{
		"redis": {system: "bullmq", url: "redis://127.0.0.1:6379/0"},
		"river": {system: "river", url: "postgres://postgres@127.0.0.1:5432/river?sslmode=disable"},
	})
	const redisSecret, riverSecret = "approver-redis-secret-7f3a", "approver-river-secret-91c2"
	secrets := func(c *cli) *cli {
		c.env = append(c.env, "EXPIRYCTL_REDIS_PASSWORD="+redisSecret, "EXPIRYCTL_RIVER_PASSWORD="+riverSecret,
			"EXPIRYCTL_RIVER_USER=approver")
		return c.withConfig(cfg)
	}
	alice := secrets(newCLI(db.Login(t, "alice", "expiryctl_operator").URL, ""))
	bob := secrets(newCLI(db.Login(t, "bob", "expiryctl_approver").URL, ""))

	forge := func(system deadletter.System, queue, conn string) (int64, error) {
		body := []byte(`{"reservation_id":"r-forged","idempotency_key":"expire:r-forged:` + queue + `"}`)
		l := deadletter.Letter{System: system, Connection: conn, Native: []byte(`{"job_id":"1","incarnation":"1:1"}`),
			Fingerprint: sha256.Sum256([]byte(queue + conn)), JobKey: "expire:r-forged:" + queue, IdempotencyKey: "expire:r-forged:" + queue,
			SourceQueue: queue, Category: deadletter.TransientExhausted, Headers: []byte(`{}`), Payload: body, DeadLetteredAt: time.Now()}
		res, err := deadletter.InsertAs(ctx, ingesterLogin.Pool, "", queue, []deadletter.Letter{l})
		return res.FirstID, err
	}

	// Letters that name the decoys' servers, as the letters of before did,
	// are refused by the archive itself.
	for _, f := range []struct {
		system deadletter.System
		queue  string
	}{
		{deadletter.System("bullmq"), fmt.Sprintf("bullmq://%s/0/bull/reservation-expiry", redis.addr())},
		{deadletter.System("river"), fmt.Sprintf("river://%s/river/expiry", postgres.addr())},
		{deadletter.System("jobtable"), fmt.Sprintf("jobtable://%s/jobs/public.jobs", postgres.addr())},
	} {
		_, err := forge(f.system, f.queue, "")
		if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.ConstraintName != "dead_letters_connection_named" {
			t.Errorf("the ingester stored a letter naming the server %s: %v", f.queue, err)
		}
	}

	// Letters that name connections the operator never configured: one
	// of a name the attacker chose, one of the name the decoy's server
	// would have if someone typed its URL on the command line.
	derived := config.DeriveName("bullmq", redis.addr(), "0")
	forged := []struct {
		system deadletter.System
		queue  string
	}{
		{deadletter.System("bullmq"), "bullmq://evil/bull/reservation-expiry"},
		{deadletter.System("bullmq"), "bullmq://" + derived + "/bull/reservation-expiry"},
		{deadletter.System("river"), "river://evil-river/expiry"},
	}
	for _, f := range forged {
		id, err := forge(f.system, f.queue, "")
		if err != nil {
			t.Fatalf("the ingester's letter of %s: %v", f.queue, err)
		}
		letter := strconv.FormatInt(id, 10)
		alice.ok(t, "dlq", "show", letter)
		var req struct {
			ID int64 `json:"id"`
		}
		decodeJSON(t, alice.ok(t, "replay", "request", "--id", letter, "--same-handler-ok", "the fix is deployed",
			"--why", "INC-54: the forged letter", "--canary", "0", "-o", "json"), &req)
		id2 := strconv.FormatInt(req.ID, 10)
		shown := bob.ok(t, "replay", "show", id2)
		if f.system == deadletter.System("bullmq") && !strings.Contains(shown.stdout+shown.stderr, "not configured") {
			t.Errorf("replay show of %s does not say its connection is not configured:\n%s", f.queue, shown)
		}
		bob.ok(t, "replay", "approve", id2, "--why", "looks fine")
		for _, run := range [][]string{{"replay", "run", id2, "--dry-run"}, {"replay", "run", id2}} {
			res := alice.run(t, run...)
			if res.code == 0 || !strings.Contains(res.stderr, "connection-unknown") {
				t.Errorf("`%s` of %s: %s; want refused by rule connection-unknown", strings.Join(run, " "), f.queue, res)
			}
		}
		alice.run(t, "dlq", "summary", "--work-queue", f.queue)
	}

	// A URL typed with no login is refused, never tried as the operating
	// system's user.
	noLogin := newCLI(db.Login(t, "carol", "expiryctl_ingester").URL, "").withConfig(cfg)
	res := noLogin.run(t, "dlq", "ingest", "--queue", fmt.Sprintf("river://127.0.0.1:%d/river/expiry", postgres.port()))
	if res.code == 0 || !strings.Contains(res.stderr, "never logs in as the operating system's user") {
		t.Errorf("a River URL with no login: %s; want refused", res)
	}

	time.Sleep(200 * time.Millisecond)
	if n, m := redis.accepted.Load(), postgres.accepted.Load(); n != 0 || m != 0 {
		redis.mu.Lock()
		defer redis.mu.Unlock()
		t.Fatalf("the decoys were dialled: Redis %d times, PostgreSQL %d times; they heard %q", n, m, redis.heard)
	}
	t.Logf("connections to servers the operator did not configure: Redis decoy %d, PostgreSQL decoy %d", redis.accepted.Load(), postgres.accepted.Load())
}
