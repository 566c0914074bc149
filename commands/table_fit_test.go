package commands

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

// TestTablesFitTheTerminal runs every listing on 80- and 120-column
// terminals with long free text in its rows: no line is wider than the
// terminal, and each row keeps the cells a person looks it up by.
func TestTablesFitTheTerminal(t *testing.T) {
	t.Parallel()
	long := "payments-eu-west-1.reservation-expiry.dead-letter-queue-with-a-long-name"
	letters := func() *fakes.Archive {
		var rows []deadletter.Row
		for n := 1; n <= 3; n++ {
			r := fakes.Letter(n)
			r.SourceQueue, r.MessageID, r.ErrorClass = long, "expire:"+long+":v3", "upstream_connection_reset_by_peer"
			rows = append(rows, r)
		}
		return fakes.NewArchive(rows...)
	}
	requests := func() *fakes.Requests {
		r := fakes.Request(7, "alice.on-call@payments.example", 30)
		r.Why = "INC-4211: the reservations database failed over at 02:58 and every expiry in flight timed out; replaying the cohort"
		r.ReviewedBy = "bob.approver@payments.example"
		return fakes.NewRequests("bob", r, fakes.Request(6, "carol", 3))
	}
	auditRows := func() *fakes.Reviewer {
		rows := fakes.AuditRows(3)
		for i := range rows {
			rows[i].Details = []byte(`{"why":"` + strings.Repeat("INC-4211 failover ", 10) + `"}`)
			rows[i].Actor = "alice.on-call@payments.example"
		}
		return &fakes.Reviewer{Rows: rows}
	}
	for _, c := range []struct {
		name string
		cmd  func(*Factory) *cobra.Command
		args []string
		rows [][]string
	}{
		{"dlq list", func(f *Factory) *cobra.Command {
			return NewCmdDLQList(f, func(ctx context.Context, o *DLQListOptions) error {
				o.Archive = serve[service.Archive](letters())
				return dlqListRun(ctx, o)
			})
		}, nil, [][]string{{"3", "r-3", "dead"}, {"1", "r-1", "dead"}}},
		{"replay list", func(f *Factory) *cobra.Command {
			return NewCmdReplayList(f, func(ctx context.Context, o *ReplayListOptions) error {
				o.Requests = serve[service.Requests](requests())
				return replayListRun(ctx, o)
			})
		}, nil, [][]string{{"7", "replay", "pending", "30", "20/s"}, {"6", "replay", "pending", "3"}}},
		{"replay show's cohort", func(f *Factory) *cobra.Command {
			return NewCmdReplayShow(f, func(ctx context.Context, o *ReplayShowOptions) error {
				o.Requests = serve[service.Requests](requests())
				return replayShowRun(ctx, o)
			})
		}, []string{"7", "--sample", "3", "--no-pager"}, [][]string{{"1", "1", "transient-exhausted"}, {"3", "3", "transient-exhausted"}}},
		{"audit list", func(f *Factory) *cobra.Command {
			return NewCmdAuditList(f, func(ctx context.Context, o *AuditListOptions) error {
				o.Reviewer = serve[service.AuditReviewer](auditRows())
				return auditListRun(ctx, o)
			})
		}, nil, [][]string{{"3", "ok"}, {"1", "dlq.list", "ok"}}},
		{"access list", func(f *Factory) *cobra.Command {
			return NewCmdAccessList(f, func(ctx context.Context, o *AccessListOptions) error {
				o.Access = serve[service.Access](&fakes.Access{Members: []access.Member{
					{Login: "alice", Groups: []string{access.Operator, access.Ingester, access.Approver, access.Auditor, access.Admin}, CanLogin: true},
					{Login: "postgres", Superuser: true, CanLogin: true}}})
				return accessListRun(ctx, o)
			})
		}, nil, [][]string{{"alice", "expiryctl_operator"}, {"postgres"}}},
		{"policy show", func(f *Factory) *cobra.Command {
			p := fakes.NewPolicy("carol")
			p.Current.EligibilityQuery = "SELECT status = 'held', status FROM reservations.reservations WHERE id = $1 AND version = $3 " + long
			p.Pending = []replay.PolicyChange{{ID: 3, Changes: map[string]any{"max_rate": 80.0, "eligibility_query": p.Current.EligibilityQuery},
				Why: r(long), ProposedBy: "dave", ProposedDBRole: "dave", ProposedAt: fakes.Epoch}}
			return NewCmdPolicyShow(f, func(ctx context.Context, o *PolicyShowOptions) error {
				o.Policy = serve[service.Policy](p)
				return policyShowRun(ctx, o)
			})
		}, nil, [][]string{{"max_rate", "50"}, {"eligibility_query"}, {"3", "dave (dave)", "2026-11-30T12:00:00Z"}}},
		{"dlq summary", func(f *Factory) *cobra.Command {
			return NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
				o.Archive = serve[service.Archive](incident())
				o.LiveQueues = serve[service.LiveQueues](&queueReport{report: liveTopology})
				return dlqSummaryRun(ctx, o)
			})
		}, nil, [][]string{{"transient-exhausted", "10", "3m ago", "rising ×12.0"}}},
	} {
		for _, width := range []int{80, 120} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				f, out, _ := testFactory(t)
				f.Now = fakes.Now
				onTerminal(f, width, 500)
				if err := runCmd(c.cmd(f), c.args...); err != nil {
					t.Fatal(err)
				}
				assertFits(t, out.String(), width, c.rows...)
			})
		}
	}
}

// r repeats s into a reason of a few lines' length.
func r(s string) string { return strings.Repeat(s+" ", 3) }

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ with the output of this run")

// golden compares got with testdata/name, or writes it there under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./commands -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("output differs from %s (-update rewrites it after a change you mean):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// TestIdentifiersSurvive: at 80 and 200 columns, the names a row is told
// apart by stay apart. The summary's queue column cuts a queue's name in the
// middle, so the four retry tiers of one work queue, which share all but
// their end, read differently; the audit list keeps a row's target whole.
func TestIdentifiersSurvive(t *testing.T) {
	t.Parallel()
	work := "newc.reservation-expiry-with-a-long-prefix"
	topology := deadletter.QueueReport{Queues: []deadletter.QueueState{
		{Name: work, Role: deadletter.RoleWork, Ready: 1840, Unacked: 12, PublishRate: rate(31.5)},
		{Name: work + ".retry.1000", Role: deadletter.RoleRetry, Ready: 300},
		{Name: work + ".retry.5000", Role: deadletter.RoleRetry, Ready: 10},
		{Name: work + ".retry.30000", Role: deadletter.RoleRetry, Ready: 4},
		{Name: work + ".retry.300000", Role: deadletter.RoleRetry, Ready: 1},
		{Name: work + ".dlq", Role: deadletter.RoleDeadLetter, Ready: 42},
	}, Note: "RabbitMQ's counts, up to 5 s old"}
	auditRows := func() *fakes.Reviewer {
		rows := fakes.AuditRows(3)
		for i := range rows {
			rows[i].Actor, rows[i].Action = "alice.on-call@payments.example", "replay.approve"
			rows[i].Target = fmt.Sprintf("replay_request:%d", 40+i)
			rows[i].Details = []byte(`{"why":"` + strings.Repeat("INC-4211 failover ", 4) + `"}`)
		}
		// A target can be long too; it gives way, in the middle, and
		// the outcome after it stays.
		rows[0].Action, rows[0].Target = "dlq.ingest.batch", "queue:payments-eu-west-1.reservation-expiry.dead-letter-queue-with-a-long-name"
		return &fakes.Reviewer{Rows: rows}
	}
	shown := func() *fakes.Archive {
		r := fakes.Letter(1)
		r.SourceQueue = work + ".dlq"
		d := fakes.DetailOf(r, []byte(`{"reservation_id":"r-1","note":"C:\\temp"}`))
		d.LastError = "the expiry worker gave up: transient-exhausted after five attempts against reservations-db-primary.internal:5432"
		d.Headers = deadletter.EncodeHeaders(map[string]any{"x-last-error": d.LastError + ` and "nested \"quotes\""`})
		a := fakes.NewArchive(r)
		a.SetDetail(d)
		return a
	}
	for _, c := range []struct {
		name  string
		cmd   func(*Factory) *cobra.Command
		whole []string
	}{
		{"dlq_show", func(f *Factory) *cobra.Command {
			return NewCmdDLQShow(f, func(ctx context.Context, o *DLQShowOptions) error {
				o.Archive = serve[service.Archive](shown())
				return dlqShowRun(ctx, o)
			})
		}, []string{"transient-exhausted", "reservations-db-primary.internal:5432", work + ".dlq"}},
		{"dlq_summary", func(f *Factory) *cobra.Command {
			return NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
				o.Archive = serve[service.Archive](incident())
				o.LiveQueues = serve[service.LiveQueues](&queueReport{report: topology})
				o.HoldsGap = nil
				return dlqSummaryRun(ctx, o)
			})
		}, []string{".retry.1000 ", ".retry.5000 ", ".retry.30000 ", ".retry.300000 ", ".dlq "}},
		{"audit_list", func(f *Factory) *cobra.Command {
			return NewCmdAuditList(f, func(ctx context.Context, o *AuditListOptions) error {
				o.Reviewer = serve[service.AuditReviewer](auditRows())
				return auditListRun(ctx, o)
			})
		}, []string{"replay_request:41 ", "replay_request:42 ", "long-name "}},
	} {
		for _, width := range []int{80, 200} {
			t.Run(fmt.Sprintf("%s at %d", c.name, width), func(t *testing.T) {
				t.Parallel()
				f, out, _ := testFactory(t)
				f.Now = fakes.Now
				onTerminal(f, width, 500)
				// An empty, not nil, argv: cobra reads os.Args for a nil one.
				args := []string{}
				if c.name == "dlq_show" {
					args = []string{"1", "--no-pager"}
				}
				if err := runCmd(c.cmd(f), args...); err != nil {
					t.Fatal(err)
				}
				var rows [][]string
				if c.name == "audit_list" {
					rows = [][]string{{"3", "ok"}, {"2", "ok"}, {"1", "ok"}}
				}
				assertFits(t, out.String(), width, rows...)
				for _, w := range c.whole {
					if !strings.Contains(out.String(), w) {
						t.Errorf("%q is not shown whole at %d columns:\n%s", w, width, out)
					}
				}
				golden(t, fmt.Sprintf("%s_%d.golden", c.name, width), out.String())
			})
		}
	}
}
