package servicetest_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/commands"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/service/servicetest"
	"github.com/expiryctl/expiryctl/replay"
)

// The requests and runner contracts against replay.Service and the runner
// the commands build: each case has a database of its own, and its people
// are logins in every group that are neither superusers nor the owner.

func TestRequestsContractPostgres(t *testing.T) {
	t.Parallel()
	servicetest.Requests(t, func(t *testing.T) servicetest.RequestsWorld {
		w, _ := requestsWorld(t)
		return w
	})
}

func TestRunnerContractPostgres(t *testing.T) {
	t.Parallel()
	servicetest.Runner(t, func(t *testing.T) servicetest.RunnerWorld {
		w, people := requestsWorld(t)
		return servicetest.RunnerWorld{Letters: w.Letters, As: w.As,
			Runner: func(person string) service.Runner { return factoryRunner(t, people.Get(person), person) }}
	})
}

// requestsWorld is a database of its own with its people, each acting
// through replay.Service as their own login.
func requestsWorld(t *testing.T) (servicetest.RequestsWorld, *pgtest.People) {
	db := pgtest.New(t)
	people := db.People(t)
	return servicetest.RequestsWorld{
		Letters: letterSeeder(t, db),
		As: func(person string) service.Requests {
			return &replay.Service{Pool: people.Get(person).Pool, Actor: person}
		},
	}, people
}

// factoryRunner is the service.Runner `expiryctl replay run` gets: from the
// commands' Factory, connected as login and labelled person, with RabbitMQ
// and its management API at their defaults (dialled only for a replay).
func factoryRunner(t *testing.T, login *pgtest.Login, person string) service.Runner {
	t.Helper()
	f := &commands.Factory{
		IO:              &commands.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard},
		Now:             time.Now,
		Getenv:          func(string) string { return "" },
		DatabaseURLFlag: login.URL,
		ActorFlag:       person,
	}
	t.Cleanup(f.Close)
	runner, err := f.Runner(context.Background())
	if err != nil {
		t.Fatalf("build the runner as %s: %v", person, err)
	}
	return runner
}

// letterSeeder returns the world's Letters: it archives n transient
// letters with an origin to replay to, each unlike any before it in db.
func letterSeeder(t *testing.T, db *pgtest.Database) func(n int) []int64 {
	var mu sync.Mutex
	next := 0
	return func(n int) []int64 {
		t.Helper()
		mu.Lock()
		first := next
		next += n
		mu.Unlock()
		batch := make([]deadletter.Letter, n)
		for i := range batch {
			batch[i] = contractLetter(first + i)
		}
		ctx := context.Background()
		var res deadletter.StoreResult
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			var err error
			res, err = deadletter.Insert(ctx, tx, batch)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stored != n {
			t.Fatalf("stored %d of %d letters", res.Stored, n)
		}
		rows, err := db.Pool.Query(ctx, "SELECT id FROM expiryctl.dead_letters WHERE id BETWEEN $1 AND $2 ORDER BY id", res.FirstID, res.LastID)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
}

// contractLetter is the nth letter of a case: a reservation expiry that
// timed out on the database, for the reservations exchange.
func contractLetter(n int) deadletter.Letter {
	body := fmt.Appendf(nil, `{"reservation_id":"r-%d","expected_version":1,"hold_until":"2026-11-30T12:00:00Z","idempotency_key":"expire:r-%d:v1"}`, n, n)
	return deadletter.Letter{
		Fingerprint: sha256.Sum256(body), JobKey: fmt.Sprintf("expire:r-%d:v1", n), MessageID: fmt.Sprintf("m-%d", n),
		ReservationID: fmt.Sprintf("r-%d", n), IdempotencyKey: fmt.Sprintf("expire:r-%d:v1", n),
		SourceQueue: "q.dlq", OriginalExchange: "reservations", OriginalRoutingKey: "reservation.expire",
		Category: deadletter.TransientExhausted, ErrorClass: "db_timeout", Attempts: 5,
		Headers: []byte(`{"x-error-class":"db_timeout"}`), ContentType: "application/json",
		Payload: body, PayloadHash: sha256.Sum256(body),
		DeadLetteredAt: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Second),
	}
}
