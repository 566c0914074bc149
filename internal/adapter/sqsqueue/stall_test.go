package sqsqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/sqstest"
)

// stallInserts makes every insert into the archive wait, as a database
// that stalls mid-batch does, until the returned release is called (or
// the test ends): an owner's SHARE lock on dead_letters, which
// ingest_letters' INSERT (ROW EXCLUSIVE) waits for and reads do not.
func stallInserts(t *testing.T, db *pgtest.Database) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE expiryctl.dead_letters IN SHARE MODE"); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatal(err)
	}
	released := false
	release = func() {
		if !released {
			released = true
			_ = tx.Rollback(ctx)
		}
	}
	t.Cleanup(release)
	return release
}

// waitInsertStalled waits until an insert into the archive waits for the
// lock stallInserts holds: a batch is being stored.
func waitInsertStalled(t *testing.T, db *pgtest.Database) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var waiting int
		if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
			WHERE NOT granted AND relation = 'expiryctl.dead_letters'::regclass`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no batch began storing within 15 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// auditedDuplicates is the duplicates the batches' own audit rows counted.
func auditedDuplicates(t *testing.T, db *pgtest.Database) int64 {
	t.Helper()
	var n int64
	if err := db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum((details->>'duplicates')::int), 0)
		FROM expiryctl.audit_log WHERE action = 'dlq.ingest.batch'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// ingestResult is how a background ingest ended.
type ingestResult struct {
	stats deadletter.IngestStats
	err   error
}

// ingestInBackground runs deadletter.Ingest of src and closes src after.
func ingestInBackground(db *pgtest.Database, src *sqsqueue.DLQSource) <-chan ingestResult {
	done := make(chan ingestResult, 1)
	go func() {
		stats, err := deadletter.Ingest(context.Background(), db.Pool, src, deadletter.IngestOptions{Queue: src.QueueName(), Actor: "test", Batch: 50})
		_ = src.Close()
		done <- ingestResult{stats, err}
	}()
	return done
}

// TestStalledBatchOutlivesVisibility: PostgreSQL stalls while the first
// batches are stored, past the queue's visibility timeout, and the
// visibility cannot be extended (the role lacks
// sqs:ChangeMessageVisibility), so SQS hands every letter out again while
// the first copies wait to commit. The archive holds each letter once; the
// copies are received, counted as duplicates and deleted.
func TestStalledBatchOutlivesVisibility(t *testing.T) {
	awsEnv(t)
	const letters = 20
	direct := sqstest.Client(t)
	db := pgtest.New(t)
	url, _ := sqstest.CreateQueue(t, direct, sqstest.Name(t, "-dlq"), map[string]string{"VisibilityTimeout": "3"})
	sendLetters(t, direct, url, letters)
	p := sqstest.NewFaultProxy(t, sqstest.Endpoint(), 1)
	p.Inject(sqstest.FaultRule{Ops: []string{"ChangeMessageVisibility", "ChangeMessageVisibilityBatch"},
		Faults: []sqstest.Fault{{Kind: sqstest.Denied}}})

	release := stallInserts(t, db)
	src := proxiedSource(t, p, url, sqsqueue.SourceOptions{Prefetch: 100, Visibility: 3 * time.Second})
	done := ingestInBackground(db, src)
	waitInsertStalled(t, db)
	stalled := time.Now()
	// The stall lasts until SQS has handed out every letter a second time.
	deadline := stalled.Add(20 * time.Second)
	for {
		twice := 0
		for _, n := range p.Stats().Handed {
			if n >= 2 {
				twice++
			}
		}
		if twice == letters {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s of stall, %d of %d letters were handed out again: %s", twice, letters, p.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	release()
	held := time.Since(stalled)
	res := <-done
	faults := p.Stats()
	t.Logf("stalled %s; ingest %+v; proxy: %s", held.Round(time.Millisecond), res.stats, faults)
	if res.err != nil {
		t.Fatalf("ingest: %v", res.err)
	}

	checkArchived(t, db, letters)
	handed := 0
	for _, n := range faults.Handed {
		handed += n
	}
	if res.stats.Received != int64(handed) || res.stats.Stored != letters || res.stats.Duplicates != int64(handed-letters) {
		t.Errorf("ingest counted %+v; SQS handed out %d copies of %d letters: want all received, %d stored, the other %d duplicates",
			res.stats, handed, letters, letters, handed-letters)
	}
	if n := auditedDuplicates(t, db); n != res.stats.Duplicates {
		t.Errorf("the batches' audit rows count %d duplicates, the ingest %d", n, res.stats.Duplicates)
	}
	if faults.FaultedOps["ChangeMessageVisibility"]+faults.FaultedOps["ChangeMessageVisibilityBatch"] == 0 {
		t.Errorf("the visibility was never extended, so never refused: %s", faults)
	}
	waitEmpty(t, direct, url, 10*time.Second)
}

// TestStalledBatchKeptHidden is the same stall with the visibility
// extension working: SQS hands no letter out twice however long the
// batch takes to commit.
func TestStalledBatchKeptHidden(t *testing.T) {
	awsEnv(t)
	const (
		letters    = 20
		visibility = 3 * time.Second
	)
	direct := sqstest.Client(t)
	db := pgtest.New(t)
	url, _ := sqstest.CreateQueue(t, direct, sqstest.Name(t, "-dlq"), map[string]string{"VisibilityTimeout": "3"})
	sendLetters(t, direct, url, letters)
	p := sqstest.NewFaultProxy(t, sqstest.Endpoint(), 1)

	release := stallInserts(t, db)
	src := proxiedSource(t, p, url, sqsqueue.SourceOptions{Prefetch: 100, Visibility: visibility})
	done := ingestInBackground(db, src)
	waitInsertStalled(t, db)
	// Over twice the visibility: without the extension every letter
	// would have been handed out again, as in
	// TestStalledBatchOutlivesVisibility.
	time.Sleep(2*visibility + time.Second)
	release()
	res := <-done
	faults := p.Stats()
	t.Logf("ingest %+v; proxy: %s", res.stats, faults)
	if res.err != nil {
		t.Fatalf("ingest: %v", res.err)
	}

	checkArchived(t, db, letters)
	if res.stats.Received != letters || res.stats.Stored != letters || res.stats.Duplicates != 0 || faults.Redelivered() != 0 {
		t.Errorf("ingest counted %+v, SQS redelivered %d: want %d received and stored, no copy", res.stats, faults.Redelivered(), letters)
	}
	if faults.Passed["ChangeMessageVisibility"]+faults.Passed["ChangeMessageVisibilityBatch"] == 0 {
		t.Errorf("no visibility extension reached SQS: %s", faults)
	}
	waitEmpty(t, direct, url, 10*time.Second)
}
