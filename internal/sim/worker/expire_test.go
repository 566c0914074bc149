package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

func newSchemaDB(t *testing.T) *pgtest.Database {
	t.Helper()
	db := pgtest.New(t)
	if err := worker.EnsureSchema(context.Background(), db.Pool); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestExpireOnce(t *testing.T) {
	t.Parallel()
	db := newSchemaDB(t)
	ctx := context.Background()

	tests := []struct {
		name        string
		seed        *reservation
		expected    int64
		wantOutcome worker.Outcome
		wantClass   string
		wantStatus  string
		wantVersion int64
		wantRelease int
		wantKey     bool
	}{
		{name: "held at expected version", seed: &reservation{status: "held", version: 3},
			expected: 3, wantOutcome: worker.Expired, wantStatus: "expired", wantVersion: 4, wantRelease: 1, wantKey: true},
		{name: "already expired", seed: &reservation{status: "expired", version: 4},
			expected: 3, wantOutcome: worker.Skipped, wantStatus: "expired", wantVersion: 4, wantKey: true},
		{name: "paid", seed: &reservation{status: "paid", version: 5},
			expected: 3, wantOutcome: worker.Skipped, wantStatus: "paid", wantVersion: 5, wantKey: true},
		{name: "held at another version", seed: &reservation{status: "held", version: 5},
			expected: 3, wantClass: worker.ClassVersionConflict, wantStatus: "held", wantVersion: 5},
		{name: "missing", expected: 3, wantClass: worker.ClassNotFound},
	}
	for i, tt := range tests {
		id := fmt.Sprintf("r-%d", i)
		if tt.seed != nil {
			r := *tt.seed
			r.id = id
			seedReservation(t, db.Pool, r)
		}
		job := jobFor(id, tt.expected)

		outcome, err := worker.ExpireOnce(ctx, db.Pool, job)

		if tt.wantClass != "" {
			var jobErr *worker.JobError
			if !errors.As(err, &jobErr) || jobErr.Class != tt.wantClass || !jobErr.Permanent {
				t.Errorf("%s: ExpireOnce = %q, %v; want permanent %s", tt.name, outcome, err, tt.wantClass)
			}
		} else if err != nil || outcome != tt.wantOutcome {
			t.Errorf("%s: ExpireOnce = %q, %v; want %q", tt.name, outcome, err, tt.wantOutcome)
		}
		if tt.seed != nil {
			if status, version := readReservation(t, db.Pool, id); status != tt.wantStatus || version != tt.wantVersion {
				t.Errorf("%s: reservation is %s v%d, want %s v%d", tt.name, status, version, tt.wantStatus, tt.wantVersion)
			}
		}
		if n := countRows(t, db.Pool, `SELECT count(*) FROM reservations.capacity_releases WHERE reservation_id = $1`, id); n != tt.wantRelease {
			t.Errorf("%s: %d capacity releases, want %d", tt.name, n, tt.wantRelease)
		}
		keys := countRows(t, db.Pool, `SELECT count(*) FROM reservations.processed_jobs WHERE idempotency_key = $1`, job.IdempotencyKey)
		if (keys == 1) != tt.wantKey {
			t.Errorf("%s: idempotency key recorded = %v, want %v", tt.name, keys == 1, tt.wantKey)
		}
	}
}

func TestExpireOnceTransitionsOnceUnderDuplicateDelivery(t *testing.T) {
	t.Parallel()
	db := newSchemaDB(t)
	ctx := context.Background()
	seedReservation(t, db.Pool, reservation{id: "r-dup", version: 7})
	job := jobFor("r-dup", 7)

	first, err := worker.ExpireOnce(ctx, db.Pool, job)
	if err != nil || first != worker.Expired {
		t.Fatalf("first delivery = %q, %v; want expired", first, err)
	}
	second, err := worker.ExpireOnce(ctx, db.Pool, job)
	if err != nil || second != worker.Duplicate {
		t.Fatalf("second delivery = %q, %v; want duplicate", second, err)
	}
	if status, version := readReservation(t, db.Pool, "r-dup"); status != "expired" || version != 8 {
		t.Errorf("reservation is %s v%d, want expired v8", status, version)
	}
	if n := countRows(t, db.Pool, `SELECT count(*) FROM reservations.capacity_releases`); n != 1 {
		t.Errorf("%d capacity releases, want 1", n)
	}
}

func TestExpireOnceConcurrentDeliveries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// sameKey: the broker redelivered one job; otherwise several
		// producers issued distinct jobs for the same hold.
		sameKey  bool
		wantRest worker.Outcome
	}{
		{name: "same idempotency key", sameKey: true, wantRest: worker.Duplicate},
		{name: "distinct keys, same version", sameKey: false, wantRest: worker.Skipped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := newSchemaDB(t)
			seedReservation(t, db.Pool, reservation{id: "r-race", version: 2})
			const n = 12
			outcomes := make([]worker.Outcome, n)
			errs := make([]error, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				job := jobFor("r-race", 2)
				if !tt.sameKey {
					job.IdempotencyKey = fmt.Sprintf("%s#%d", job.IdempotencyKey, i)
				}
				wg.Go(func() {
					<-start
					outcomes[i], errs[i] = worker.ExpireOnce(context.Background(), db.Pool, job)
				})
			}
			close(start)
			wg.Wait()

			counts := map[worker.Outcome]int{}
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("delivery %d: %v", i, errs[i])
				}
				counts[outcomes[i]]++
			}
			if counts[worker.Expired] != 1 || counts[tt.wantRest] != n-1 {
				t.Errorf("outcomes %v, want 1 expired and %d %s", counts, n-1, tt.wantRest)
			}
			if status, version := readReservation(t, db.Pool, "r-race"); status != "expired" || version != 3 {
				t.Errorf("reservation is %s v%d, want expired v3", status, version)
			}
			if got := countRows(t, db.Pool, `SELECT count(*) FROM reservations.capacity_releases`); got != 1 {
				t.Errorf("%d capacity releases, want 1", got)
			}
		})
	}
}

func TestExpireOnceDatabaseUnavailableIsTransient(t *testing.T) {
	t.Parallel()
	db := newSchemaDB(t)
	seedReservation(t, db.Pool, reservation{id: "r-1"})

	closed := pgtest.Connect(t, db.URL)
	closed.Close()
	expiredCtx, cancel := context.WithCancel(context.Background())
	cancel()
	timedOut, cancelTimeout := context.WithTimeout(context.Background(), 0)
	defer cancelTimeout()

	for name, call := range map[string]func() (worker.Outcome, error){
		"closed pool": func() (worker.Outcome, error) {
			return worker.ExpireOnce(context.Background(), closed, jobFor("r-1", 1))
		},
		"deadline passed":  func() (worker.Outcome, error) { return worker.ExpireOnce(timedOut, db.Pool, jobFor("r-1", 1)) },
		"context canceled": func() (worker.Outcome, error) { return worker.ExpireOnce(expiredCtx, db.Pool, jobFor("r-1", 1)) },
	} {
		_, err := call()
		var jobErr *worker.JobError
		if !errors.As(err, &jobErr) || jobErr.Permanent || jobErr.Class != worker.ClassDBTimeout {
			t.Errorf("%s: error %v, want transient %s", name, err, worker.ClassDBTimeout)
		}
	}
	if status, _ := readReservation(t, db.Pool, "r-1"); status != "held" {
		t.Errorf("reservation is %s after failed attempts, want held", status)
	}
}

func TestEnsureSchemaIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = worker.EnsureSchema(context.Background(), db.Pool) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent EnsureSchema %d: %v", i, err)
		}
	}
	if err := worker.EnsureSchema(context.Background(), db.Pool); err != nil {
		t.Fatalf("EnsureSchema again: %v", err)
	}
}
