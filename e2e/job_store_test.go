package e2e_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/replay"
)

// The steps the job-store incidents (River's, BullMQ's) share: each
// captures, summarises and re-captures its store through the CLI alike.

// jobShown is the part of `dlq show -o json` of a job store's letter the
// tests read.
type jobShown struct {
	System          string            `json:"system"`
	SourceQueue     string            `json:"source_queue"`
	MessageID       string            `json:"message_id"`
	Category        string            `json:"reason_category"`
	Attempts        int               `json:"attempts"`
	LastError       string            `json:"last_error"`
	IdempotencyKey  string            `json:"idempotency_key"`
	PreviousID      *int64            `json:"previous_id"`
	ReplayRequestID *int64            `json:"replay_request_id"`
	Native          map[string]string `json:"native"`
	Payload         []byte            `json:"payload"`
	AttemptHistory  []struct {
		Attempt int    `json:"attempt"`
		Error   string `json:"error"`
		Trace   string `json:"trace"`
	} `json:"attempt_history"`
}

// shortCanary sets the policy's canary window to 300ms: a run watches for
// its jobs failing again that long after its last retry, and the tests'
// workers take the retried jobs at once.
func shortCanary(t *testing.T, db *pgtest.Database) {
	t.Helper()
	setPolicy(t, db, "canary_window=300ms")
}

// setPolicy applies changes to the test's policy as its owner.
func setPolicy(t *testing.T, db *pgtest.Database, changes ...string) {
	t.Helper()
	parsed, err := replay.ParsePolicyChanges(changes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.SetPolicy(withTimeout(t), db.Pool, "admin", parsed); err != nil {
		t.Fatal(err)
	}
}

// captureTwice runs `dlq ingest --queue queue` twice: the first stores
// the n failed jobs, the second, reading them again, stores nothing.
func captureTwice(t *testing.T, ingester *cli, queue string, n int) {
	t.Helper()
	res := ingester.ok(t, "dlq", "ingest", "--queue", queue)
	if want := fmt.Sprintf("ingested %d letters", n); !strings.Contains(res.stderr, want) {
		t.Errorf("ingest should say %q: %s", want, res)
	}
	res = ingester.ok(t, "dlq", "ingest", "--queue", queue)
	if !strings.Contains(res.stderr, "0 stored") && !strings.Contains(res.stderr, fmt.Sprintf("%d duplicates", n)) {
		t.Errorf("a second capture should store nothing: %s", res)
	}
}

// checkIsolated checks that `dlq summary --work-queue workQueue` reads the
// store's own live states: its n failed jobs isolated, none ready, and
// its workers counted only where the store shows them (null, not 0,
// where it shows none).
func checkIsolated(t *testing.T, c *cli, workQueue string, n int) {
	t.Helper()
	var doc struct {
		LiveQueues struct {
			Unavailable string `json:"unavailable"`
			Ready       *int64 `json:"ready"`
			Isolated    *int64 `json:"isolated"`
			Consumers   *int   `json:"consumers"`
		} `json:"live_queues"`
	}
	decodeJSON(t, c.ok(t, "dlq", "summary", "--work-queue", workQueue, "-o", "json"), &doc)
	if lq := doc.LiveQueues; lq.Unavailable != "" || lq.Isolated == nil || *lq.Isolated != int64(n) || lq.Ready == nil || *lq.Ready != 0 {
		t.Errorf("dlq summary's live queue %s: %+v, want %d isolated and none ready", workQueue, lq, n)
	}
	for _, s := range registry.JobStores() {
		if !s.IsRef(workQueue) {
			continue
		}
		if unseen := s.Traits().Evidence == driver.NoConsumers; (doc.LiveQueues.Consumers == nil) != unseen {
			t.Errorf("dlq summary's live queue %s counts consumers %v; %s shows them: %v", workQueue,
				doc.LiveQueues.Consumers, s.Words().Title, !unseen)
		}
	}
}

// replayItem is the state of letter's item in request, and its last error.
func replayItem(t *testing.T, db *pgtest.Database, request, letter int64) (state, why string) {
	t.Helper()
	if err := db.Pool.QueryRow(withTimeout(t), `SELECT state, coalesce(last_error, '') FROM expiryctl.replay_items WHERE request_id = $1 AND dead_letter_id = $2`,
		request, letter).Scan(&state, &why); err != nil {
		t.Fatal(err)
	}
	return state, why
}

// newestLetter is the id of the letter captured last, after checking that
// the archive holds want letters.
func newestLetter(t *testing.T, db *pgtest.Database, want int) int64 {
	t.Helper()
	var newest int64
	var total int
	if err := db.Pool.QueryRow(withTimeout(t), `SELECT max(id), count(*)::int FROM expiryctl.dead_letters`).Scan(&newest, &total); err != nil {
		t.Fatal(err)
	}
	if total != want {
		t.Errorf("%d letters archived, want %d", total, want)
	}
	return newest
}
