package commands

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui"
)

// TestTUIServicesRunAndAudit drives the adapters behind the TUI's run and
// audit screens, as the Factory builds them, against a real database: an
// approved discard request runs through the same runner as `replay run` (a
// discard needs no broker, so dialling one fails the test), and the audit
// screen lists and verifies the trail those actions wrote.
func TestTUIServicesRunAndAudit(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	letters := make([]deadletter.Letter, 3)
	for i := range letters {
		body := fmt.Appendf(nil, `{"reservation_id":"r-%d"}`, i)
		letters[i] = deadletter.Letter{Fingerprint: sha256.Sum256(body), SourceQueue: "q.dlq", Category: deadletter.Conflict,
			Headers: []byte(`{}`), Payload: body, PayloadHash: sha256.Sum256(body), DeadLetteredAt: time.Now().UTC()}
	}
	if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error { _, err := deadletter.Insert(ctx, tx, letters); return err }); err != nil {
		t.Fatal(err)
	}
	bob := db.Login(t, "bob", "expiryctl_approver")
	if _, err := replay.SetPolicy(ctx, db.Pool, "admin", map[string]any{"approvers": []string{bob.Name}}); err != nil {
		t.Fatal(err)
	}
	created, err := (&replay.Service{Pool: db.Pool, Actor: "alice"}).Create(ctx, replay.NewRequest{Kind: replay.KindDiscard,
		Selection: replay.Selection{Max: 10}, Why: "versions moved on"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&replay.Service{Pool: bob.Pool, Actor: "bob"}).Approve(ctx, created.Request.ID,
		replay.ReviewOptions{CohortHash: created.Request.CohortHash}); err != nil {
		t.Fatal(err)
	}

	// The services come from the Factory, as `expiryctl tui` gets them; its
	// RabbitMQ URL points nowhere, so a run that dialled would fail.
	f, _, _ := auditFactory(t, db, "bob")
	f.AMQPURLFlag = "amqp://nobody:secret@127.0.0.1:1/"
	svc, err := f.TUIServices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var progressed int
	summary, err := svc.Runner.Run(ctx, created.Request.ID, func(tui.RunProgress) { progressed++ })
	if err != nil {
		t.Fatal(err)
	}
	if summary.Status != replay.StatusCompleted || summary.Final.Confirmed != 3 || summary.Final.Total != 3 || progressed == 0 {
		t.Fatalf("run summary = %+v after %d progress calls, want 3 of 3 confirmed and completed", summary, progressed)
	}
	var discarded int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letter_states WHERE status = 'discarded'`).Scan(&discarded); err != nil || discarded != 3 {
		t.Fatalf("%d letters discarded (%v), want 3", discarded, err)
	}

	f, _, _ = auditFactory(t, db, "carol")
	if svc, err = f.TUIServices(ctx); err != nil {
		t.Fatal(err)
	}
	trail := svc.Audit
	page, err := trail.List(ctx, tui.AuditFilter{Target: fmt.Sprintf("replay_request:%d", created.Request.ID)}, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]bool{}
	for _, e := range page.Entries {
		actions[e.Action] = true
	}
	for _, want := range []string{"replay.request", "replay.approve", "replay.run.start", "replay.complete"} {
		if !actions[want] {
			t.Errorf("the audit screen's list lacks %s: %v", want, actions)
		}
	}
	check, err := trail.Verify(ctx)
	if err != nil || !check.OK || check.Rows == 0 {
		t.Fatalf("verify = %+v, %v; want an intact chain", check, err)
	}
	var reads int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_log WHERE actor = 'carol' AND action IN ('audit.list', 'audit.verify')`).Scan(&reads); err != nil || reads != 2 {
		t.Fatalf("%d audit rows for the screen's reads (%v), want 2", reads, err)
	}
}

// TestTUICanarySaysWhatWentOut: a canary that halted after 3 of its 4
// letters went out says 3 on the run screen, not the request's 4.
func TestTUICanarySaysWhatWentOut(t *testing.T) {
	t.Parallel()
	req := replay.Request{ID: 7, Kind: replay.KindReplay, Canary: 4, Rate: 5}
	for _, tc := range []struct {
		name  string
		stops replay.Readings
		want  int
	}{
		{"halted mid-canary", replay.Readings{Canary: replay.CanaryFailed, CanarySent: 3}, 3},
		{"going out", replay.Readings{Canary: replay.CanaryPublishing, CanarySent: 1}, 4},
		{"sent by an earlier run", replay.Readings{Canary: replay.CanaryWaiting}, 4},
	} {
		if got := tuiProgress(replay.Progress{Stops: tc.stops}, req).CanaryItems; got != tc.want {
			t.Errorf("%s: canary of %d letters, want %d", tc.name, got, tc.want)
		}
	}
}
