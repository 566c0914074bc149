package commands

import (
	"context"
	"encoding/csv"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

// readCSV parses out as CSV, failing the test unless it is valid and
// starts with headers.
func readCSV(t *testing.T, out string, headers []string) [][]string {
	t.Helper()
	records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("-o csv does not parse: %v\n%s", err, out)
	}
	if len(records) == 0 || !slices.Equal(records[0], headers) {
		t.Fatalf("-o csv header = %v, want %v", records, headers)
	}
	return records[1:]
}

// column is the cell of record under header.
func column(t *testing.T, headers, record []string, header string) string {
	t.Helper()
	i := slices.Index(headers, header)
	if i < 0 || i >= len(record) {
		t.Fatalf("no column %q in %v", header, record)
	}
	return record[i]
}

func TestListingsTakeCSV(t *testing.T) {
	t.Parallel()
	// Each listing on a terminal: -o csv is for programs wherever it runs.
	run := func(t *testing.T, cmd func(f *Factory) *cobra.Command, args ...string) string {
		t.Helper()
		f, out, _ := testFactory(t)
		onTerminal(f, 80, 24)
		f.Now = fakes.Now
		if err := runCmd(cmd(f), append(args, "-o", "csv")...); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "\x1b") {
			t.Errorf("-o csv is styled:\n%q", out)
		}
		return out.String()
	}

	t.Run("replay list", func(t *testing.T) {
		t.Parallel()
		approved := fakes.Request(2, "carol", 5)
		approved.Status, approved.ReviewedBy, approved.Why = replay.StatusApproved, "bob", "INC-4211, \"db\" failover\nsee ticket"
		requests := fakes.NewRequests("bob", fakes.Request(1, "alice", 3), approved)
		out := run(t, func(f *Factory) *cobra.Command {
			return NewCmdReplayList(f, func(ctx context.Context, o *ReplayListOptions) error {
				o.Requests = serve[service.Requests](requests)
				return replayListRun(ctx, o)
			})
		})
		rows := readCSV(t, out, requestCSVHeaders)
		if len(rows) != 2 || rows[0][0] != "2" || rows[1][0] != "1" {
			t.Fatalf("replay list -o csv rows = %v", rows)
		}
		// The why is whole, its comma, quotes and newline included.
		if got := column(t, requestCSVHeaders, rows[0], "why"); got != approved.Why {
			t.Errorf("why = %q, want %q", got, approved.Why)
		}
		if column(t, requestCSVHeaders, rows[0], "status") != "approved" || column(t, requestCSVHeaders, rows[0], "reviewed_by") != "bob" ||
			column(t, requestCSVHeaders, rows[0], "created_at") != approved.CreatedAt.UTC().Format("2006-01-02T15:04:05Z07:00") {
			t.Errorf("replay list -o csv row = %v", rows[0])
		}
	})
	t.Run("replay list refuses csv with --watch", func(t *testing.T) {
		t.Parallel()
		f, _, _ := testFactory(t)
		err := runCmd(NewCmdReplayList(f, func(context.Context, *ReplayListOptions) error {
			t.Error("ran with --watch -o csv")
			return nil
		}), "--watch", "-o", "csv")
		wantExit(t, err, ExitUsage)
	})
	t.Run("audit list", func(t *testing.T) {
		t.Parallel()
		rows := fakes.AuditRows(3)
		rows[0].Details = []byte(`{"why":"a, b"}`)
		out := run(t, func(f *Factory) *cobra.Command {
			return NewCmdAuditList(f, func(ctx context.Context, o *AuditListOptions) error {
				o.Reviewer = serve[service.AuditReviewer](&fakes.Reviewer{Rows: rows})
				return auditListRun(ctx, o)
			})
		})
		got := readCSV(t, out, auditCSVHeaders)
		if len(got) != 3 || got[0][0] != "3" {
			t.Fatalf("audit list -o csv = %v", got)
		}
		newest := got[0]
		if column(t, auditCSVHeaders, newest, "details") != `{"why":"a, b"}` || column(t, auditCSVHeaders, newest, "hash") != rows[0].Hash.String() ||
			column(t, auditCSVHeaders, newest, "at") != "2026-11-30T12:00:00.000000Z" || column(t, auditCSVHeaders, newest, "action") != rows[0].Action {
			t.Errorf("audit list -o csv row = %v", newest)
		}
	})
	t.Run("access list", func(t *testing.T) {
		t.Parallel()
		svc := &fakes.Access{Members: []access.Member{
			{Login: "alice", Groups: []string{access.Operator, access.Ingester}, CanLogin: true},
			{Login: "postgres", Superuser: true, CanLogin: true, Bypasses: []string{"superuser"}},
			{Login: "dba", CanLogin: true, Bypasses: []string{"createrole", "pg_write_all_data"}},
		}}
		out := run(t, func(f *Factory) *cobra.Command {
			return NewCmdAccessList(f, func(ctx context.Context, o *AccessListOptions) error {
				o.Access = serve[service.Access](svc)
				return accessListRun(ctx, o)
			})
		})
		got := readCSV(t, out, memberCSVHeaders)
		want := [][]string{{"alice", access.Operator + " " + access.Ingester, "false", "true", ""}, {"postgres", "", "true", "true", "superuser"},
			{"dba", "", "false", "true", "createrole pg_write_all_data"}}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("access list -o csv = %v, want %v", got, want)
		}
	})
	t.Run("policy show lists its pending changes", func(t *testing.T) {
		t.Parallel()
		p := fakes.NewPolicy("carol")
		p.Pending = []replay.PolicyChange{{ID: 3, Changes: map[string]any{"max_rate": 80.0, "approvers": []any{"bob", "erin"},
			"approval_ttl": "1800000000 microseconds"}, Why: "more headroom", ProposedBy: "dave", ProposedDBRole: "dave", ProposedAt: fakes.Epoch}}
		out := run(t, func(f *Factory) *cobra.Command {
			return NewCmdPolicyShow(f, func(ctx context.Context, o *PolicyShowOptions) error {
				o.Policy = serve[service.Policy](p)
				return policyShowRun(ctx, o)
			})
		})
		got := readCSV(t, out, policyChangeCSVHeaders)
		want := [][]string{{"3", "dave", "dave", "2026-11-30T12:00:00Z", "approval_ttl=30m approvers=bob,erin max_rate=80", "more headroom"}}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("policy show -o csv = %v, want %v", got, want)
		}
	})
	t.Run("dlq summary lists its categories", func(t *testing.T) {
		t.Parallel()
		out := run(t, func(f *Factory) *cobra.Command {
			return NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
				o.Archive = serve[service.Archive](incident())
				o.LiveQueues = serve[service.LiveQueues](&queueReport{report: liveTopology})
				return dlqSummaryRun(ctx, o)
			})
		})
		got := readCSV(t, out, categoryCSVHeaders)
		if len(got) == 0 {
			t.Fatalf("dlq summary -o csv has no categories:\n%s", out)
		}
		first := got[0]
		if column(t, categoryCSVHeaders, first, "reason_category") != "transient-exhausted" ||
			column(t, categoryCSVHeaders, first, "count") == "" || column(t, categoryCSVHeaders, first, "trend_5m_vs_1h") != "rising" {
			t.Errorf("dlq summary -o csv first category = %v\n%s", first, out)
		}
	})
}
