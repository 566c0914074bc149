package e2e_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/pgtest"
)

func TestScratchSpeed(t *testing.T) {
	db := pgtest.New(t)
	r := newRabbit(t)
	q := r.queue(t, ".dlq", nil)
	start := time.Now()
	r.publish(t, q, workerLetters(0, 5000, "db_timeout", "timeout")...)
	t.Logf("publish 5000: %s", time.Since(start))
	c := newCLI(db.URL, "t")
	start = time.Now()
	res := c.ok(t, "dlq", "ingest", "--queue", q, "--batch", "100")
	t.Logf("ingest: %s %s", time.Since(start), res.stderr)
	start = time.Now()
	c.ok(t, "dlq", "summary")
	t.Logf("summary run: %s", time.Since(start))
}

func TestScratchHang(t *testing.T) {
	db := pgtest.New(t)
	r := newRabbit(t)
	q := r.queue(t, ".dlq", nil)
	r.publish(t, q, workerLetters(0, 3000, "db_timeout", "timeout")...)
	_, err := db.Pool.Exec(withTimeout(t), `
		CREATE FUNCTION expiryctl.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF (SELECT count(*) FROM expiryctl.dead_letters) >= 500 THEN RAISE EXCEPTION 'disk full (simulated)'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON expiryctl.dead_letters FOR EACH ROW EXECUTE FUNCTION expiryctl.refuse();`)
	if err != nil {
		t.Fatal(err)
	}
	c := newCLI(db.URL, "t")
	p := c.start(t, "dlq", "ingest", "--queue", q, "--batch", "100")
	time.Sleep(8 * time.Second)
	ready, cons := r.inspect(t, q)
	t.Logf("rows=%d ready=%d consumers=%d exited=%v", rows(t, db.Pool), ready, cons, p.exited())
	p.signal(syscall.SIGQUIT)
	res := p.wait(20 * time.Second)
	t.Logf("%s", res.stderr[:min(len(res.stderr), 200)])
	for _, g := range strings.Split(res.stderr, "\n\n") {
		if strings.Contains(g, "deadletter") {
			t.Log(g)
		}
	}
}

func TestScratchNoHang(t *testing.T) {
	db := pgtest.New(t)
	r := newRabbit(t)
	q := r.queue(t, ".dlq", nil)
	r.publish(t, q, workerLetters(0, 1200, "db_timeout", "timeout")...)
	_, err := db.Pool.Exec(withTimeout(t), `
		CREATE FUNCTION expiryctl.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF (SELECT count(*) FROM expiryctl.dead_letters) >= 500 THEN RAISE EXCEPTION 'disk full (simulated)'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON expiryctl.dead_letters FOR EACH ROW EXECUTE FUNCTION expiryctl.refuse();`)
	if err != nil {
		t.Fatal(err)
	}
	c := newCLI(db.URL, "t")
	res := c.run(t, "dlq", "ingest", "--queue", q, "--batch", "100")
	t.Logf("%s", res)
	t.Logf("rows=%d ready=%d", rows(t, db.Pool), r.settled(t, q))
}
