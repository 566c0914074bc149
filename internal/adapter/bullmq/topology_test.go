package bullmq_test

import (
	"context"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
)

// TestTopologyAgesTheOldestJobs: the live view says how long the job a
// worker takes next has waited since it became due (its timestamp plus
// its delay), and how long ago the oldest failed job failed, by Redis's
// clock; an empty state has no age.
func TestTopologyAgesTheOldestJobs(t *testing.T) {
	t.Parallel()
	q := bullmqtest.NewQueue(t)
	ctx := context.Background()
	now := time.Now()
	seed(t, q, bullmq.TestedVersion, failedJob{ID: "1", FinishedOn: now.Add(-90 * time.Second).UnixMilli()},
		failedJob{ID: "2", FinishedOn: now.Add(-30 * time.Second).UnixMilli()})
	report, err := bullmq.Topology(ctx, q.Ref)
	if err != nil || report.Unavailable != "" {
		t.Fatalf("Topology: %+v, %v", report, err)
	}
	s := report.States()
	if s.ReadyHeadAge != nil {
		t.Errorf("no job waits, yet the ready head is %v old", *s.ReadyHeadAge)
	}
	if a := s.IsolatedHeadAge; a == nil || *a < 85*time.Second || *a > 120*time.Second {
		t.Errorf("the oldest failed job failed 90 s ago; its age reads %v", a)
	}

	// A job added 20 s ago with a delay of 5 s has waited 15 s since it
	// became due; a newer one, pushed after it, is not the head.
	q.Client.HSet(ctx, q.Key("7"), "name", "expire", "data", "{}", "timestamp", now.Add(-20*time.Second).UnixMilli(), "delay", "5000")
	q.Client.HSet(ctx, q.Key("8"), "name", "expire", "data", "{}", "timestamp", now.UnixMilli(), "delay", "0")
	q.Client.LPush(ctx, q.Key("wait"), "7", "8")
	report, err = bullmq.Topology(ctx, q.Ref)
	if err != nil || report.Unavailable != "" {
		t.Fatalf("Topology: %+v, %v", report, err)
	}
	s = report.States()
	if a := s.ReadyHeadAge; a == nil || *a < 10*time.Second || *a > 45*time.Second || s.Ready != 2 {
		t.Errorf("the job a worker takes next became due 15 s ago; ready %d, head age %v", s.Ready, a)
	}
}
