package commands

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

// TestReplayRequestFlags is the table of `replay request`'s rules: letters
// by --id or by a filter bounded by --max, never both; --why required; a
// rate that is a ceiling; a target exchange with its routing key; a fresh
// key only with the eligibility confirmation; a canary of 0 or more. The
// upper bounds of --max and --rate are the policy's, enforced by the
// database (see TestReplayRequestRun).
func TestReplayRequestFlags(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC) // testFactory's now, 3:00, less 2h
	cases := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, nr replay.NewRequest)
	}{
		{name: "ids", args: []string{"--id", "42", "--id", "43", "--why", "INC-1"}, check: func(t *testing.T, nr replay.NewRequest) {
			if nr.Kind != replay.KindReplay || len(nr.Selection.IDs) != 2 || nr.Selection.IDs[0] != 42 || nr.Selection.Max != 0 ||
				nr.Rate != 0 || nr.Canary != nil || nr.FreshKey || nr.Why != "INC-1" {
				t.Errorf("request = %+v", nr)
			}
		}},
		{name: "ids as a list", args: []string{"--id", "1,2,3", "--why", "INC-1"}, check: func(t *testing.T, nr replay.NewRequest) {
			if len(nr.Selection.IDs) != 3 {
				t.Errorf("ids = %v", nr.Selection.IDs)
			}
		}},
		{name: "filter with max", args: []string{"--reason", "transient-exhausted", "-r", "validation", "--queue", "q.dlq",
			"--since", "2h", "--search", "r-84", "--max", "200", "--why", "INC-1"}, check: func(t *testing.T, nr replay.NewRequest) {
			f := nr.Selection.Filter
			if nr.Selection.Max != 200 || len(nr.Selection.IDs) != 0 || len(f.Categories) != 2 || f.Categories[1] != deadletter.Validation ||
				f.Queue != "q.dlq" || f.Search != "r-84" || !f.Since.Equal(since) {
				t.Errorf("selection = %+v, filter %+v", nr.Selection, f)
			}
		}},
		{name: "max alone takes the oldest waiting letters", args: []string{"--max", "10", "--why", "INC-1"}, check: func(t *testing.T, nr replay.NewRequest) {
			if nr.Selection.Max != 10 || len(nr.Selection.IDs) != 0 {
				t.Errorf("selection = %+v", nr.Selection)
			}
		}},
		{name: "ids and a filter", args: []string{"--id", "1", "--reason", "validation", "--why", "x"}, wantErr: "use either --id or a filter"},
		{name: "ids and max", args: []string{"--id", "1", "--max", "5", "--why", "x"}, wantErr: "use either --id or a filter"},
		{name: "nothing chosen", args: []string{"--why", "x"}, wantErr: "choose letters: --id ID"},
		{name: "a filter without max", args: []string{"--reason", "validation", "--why", "x"}, wantErr: "a filter needs --max N"},
		{name: "a negative max is not a count", args: []string{"--queue", "q", "--max", "-5", "--why", "x"},
			wantErr: "invalid --max -5: it counts letters, so use 1 or more"},
		{name: "an unknown reason", args: []string{"--reason", "timeout", "--max", "5", "--why", "x"}, wantErr: "valid categories are"},
		{name: "a bad since", args: []string{"--since", "yesterday", "--max", "5", "--why", "x"}, wantErr: "invalid --since"},
		{name: "not before, from now", args: []string{"--id", "1", "--not-before", "30m", "--why", "x"}, check: func(t *testing.T, nr replay.NewRequest) {
			want := time.Date(2026, 11, 30, 3, 30, 0, 0, time.UTC)
			if nr.NotBefore == nil || !nr.NotBefore.Equal(want) || nr.IncludeNotDue || nr.ViaExchange {
				t.Errorf("not before %v, include not due %v, via exchange %v; want %s", nr.NotBefore, nr.IncludeNotDue, nr.ViaExchange, want)
			}
		}},
		{name: "not before, a time; letters not due; via the exchange", args: []string{"--id", "1", "--not-before", "2026-11-30T06:00:00+01:00",
			"--include-not-due", "--via-exchange", "--why", "x"}, check: func(t *testing.T, nr replay.NewRequest) {
			if nr.NotBefore == nil || !nr.NotBefore.Equal(time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)) || !nr.IncludeNotDue || !nr.ViaExchange {
				t.Errorf("not before %v, include not due %v, via exchange %v", nr.NotBefore, nr.IncludeNotDue, nr.ViaExchange)
			}
		}},
		{name: "not before in the past", args: []string{"--id", "1", "--not-before", "2026-11-30T02:00:00Z", "--why", "x"},
			wantErr: "--not-before 2026-11-30T02:00:00Z is not in the future (it is 2026-11-30T03:00:00Z now)"},
		{name: "not before unreadable", args: []string{"--id", "1", "--not-before", "after lunch", "--why", "x"},
			wantErr: `invalid --not-before "after lunch": use an RFC 3339 time (2026-11-30T03:00:00Z) or a duration from now`},
		{name: "not before a negative duration", args: []string{"--id", "1", "--not-before", "-5m", "--why", "x"}, wantErr: "invalid --not-before"},
		{name: "a bad id", args: []string{"--id", "forty-two", "--why", "x"}, wantErr: "invalid argument"},
		{name: "why is required", args: []string{"--id", "1"}, wantErr: "--why is required"},
		{name: "why is not blank", args: []string{"--id", "1", "--why", "  "}, wantErr: "--why is required"},
		{name: "rate is a ceiling", args: []string{"--id", "1", "--rate", "12.5", "--why", "x"}, check: func(t *testing.T, nr replay.NewRequest) {
			if nr.Rate != 12.5 {
				t.Errorf("rate = %g", nr.Rate)
			}
		}},
		{name: "a negative rate", args: []string{"--id", "1", "--rate", "-1", "--why", "x"}, wantErr: "invalid --rate -1"},
		{name: "a zero rate is no ceiling", args: []string{"--id", "1", "--rate", "0", "--why", "x"},
			wantErr: "invalid --rate 0: use a number of replays per second above 0, or leave --rate out for the policy's max_rate"},
		{name: "exchange and routing key", args: []string{"--id", "1", "--to-exchange", "reservations", "--routing-key", "reservation.expire", "--why", "x"},
			check: func(t *testing.T, nr replay.NewRequest) {
				if nr.ToExchange != "reservations" || nr.ToRoutingKey != "reservation.expire" {
					t.Errorf("target = %q %q", nr.ToExchange, nr.ToRoutingKey)
				}
			}},
		{name: "a routing key alone names a queue", args: []string{"--id", "1", "--routing-key", "reservation-expiry", "--why", "x"},
			check: func(t *testing.T, nr replay.NewRequest) {
				if nr.ToExchange != "" || nr.ToRoutingKey != "reservation-expiry" {
					t.Errorf("target = %q %q", nr.ToExchange, nr.ToRoutingKey)
				}
			}},
		{name: "an exchange needs a routing key", args: []string{"--id", "1", "--to-exchange", "reservations", "--why", "x"}, wantErr: "--to-exchange needs --routing-key"},
		{name: "fresh key with confirmation", args: []string{"--id", "1", "--fresh-key", "--confirm-eligible", "--why", "x"},
			check: func(t *testing.T, nr replay.NewRequest) {
				if !nr.FreshKey || !nr.ConfirmEligible {
					t.Errorf("request = %+v", nr)
				}
			}},
		{name: "fresh key without confirmation", args: []string{"--id", "1", "--fresh-key", "--why", "x"}, wantErr: "--fresh-key needs --confirm-eligible"},
		{name: "canary of none", args: []string{"--id", "1", "--canary", "0", "--why", "x"}, check: func(t *testing.T, nr replay.NewRequest) {
			if nr.Canary == nil || *nr.Canary != 0 {
				t.Errorf("canary = %v, want 0 (explicitly none)", nr.Canary)
			}
		}},
		{name: "a negative canary", args: []string{"--id", "1", "--canary", "-1", "--why", "x"}, wantErr: "invalid --canary -1"},
		{name: "an unknown output", args: []string{"--id", "1", "--why", "x", "-o", "csv"}, wantErr: "use table or json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, _, _ := testFactory(t)
			var got *replay.NewRequest
			err := runCmd(NewCmdReplayRequest(f, func(_ context.Context, o *ReplayRequestOptions) error {
				got = &o.request
				return nil
			}), c.args...)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, c.wantErr)
				}
				wantExit(t, err, ExitUsage)
				if got != nil {
					t.Fatal("ran despite the flag error")
				}
				return
			}
			if err != nil || got == nil {
				t.Fatalf("error = %v, ran = %v", err, got != nil)
			}
			c.check(t, *got)
		})
	}
}

// matchingRequests reports more matching letters than a request took, as
// the service does when a filter matches more than --max.
type matchingRequests struct {
	*fakes.Requests
	matched int
}

func (m matchingRequests) Create(ctx context.Context, nr replay.NewRequest) (replay.Created, error) {
	c, err := m.Requests.Create(ctx, nr)
	c.Matched = m.matched
	return c, err
}

func TestReplayRequestRun(t *testing.T) {
	t.Parallel()
	request := func(t *testing.T, requests service.Requests, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		err := runCmd(NewCmdReplayRequest(f, func(ctx context.Context, o *ReplayRequestOptions) error {
			o.Requests = serve(requests)
			return replayRequestRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}
	expires := fakes.Epoch.Add(time.Hour).Format(time.RFC3339)

	t.Run("text", func(t *testing.T) {
		t.Parallel()
		requests := fakes.NewRequests("alice")
		out, errOut, err := request(t, requests, "--id", "42", "--id", "43", "--why", "INC-4211")
		if err != nil {
			t.Fatal(err)
		}
		if out != "replay request 1 is pending: 2 letters, rate 20/s, canary 1, expires "+expires+"\n" {
			t.Fatalf("stdout %q", out)
		}
		if errOut != "next: ask an approver to review it with `expiryctl replay show 1` and `expiryctl replay approve 1`\n" {
			t.Fatalf("stderr %q", errOut)
		}
		if requests.Created[0].Kind != replay.KindReplay {
			t.Fatalf("created %+v", requests.Created[0])
		}
	})
	t.Run("one letter is a letter", func(t *testing.T) {
		t.Parallel()
		out, _, err := request(t, fakes.NewRequests("alice"), "--id", "42", "--why", "INC-4211")
		if err != nil || !strings.HasPrefix(out, "replay request 1 is pending: 1 letter, rate") {
			t.Fatalf("stdout %q (%v)", out, err)
		}
	})
	t.Run("a filter that matched more says so", func(t *testing.T) {
		t.Parallel()
		out, _, err := request(t, matchingRequests{fakes.NewRequests("alice"), 350}, "--reason", "validation", "--max", "200", "--why", "INC-1")
		if err != nil || !strings.Contains(out, ": 200 letters (the oldest 200 of 350 matching), rate") {
			t.Fatalf("stdout %q (%v)", out, err)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		out, errOut, err := request(t, fakes.NewRequests("alice"), "--id", "1", "--why", "x", "-o", "json")
		var r replay.Request
		if err != nil || json.Unmarshal([]byte(out), &r) != nil || r.ID != 1 || r.Status != replay.StatusPending || errOut != "" {
			t.Fatalf("json = %+v, %v:\n%s\nstderr %q", r, err, out, errOut)
		}
	})
	t.Run("a cohort above the policy's bound is refused with exit 4", func(t *testing.T) {
		t.Parallel()
		requests := fakes.NewRequests("alice")
		requests.Refuse = &replay.Refusal{Rule: "max-cohort", Message: "the policy allows at most 500 letters in a request"}
		out, _, err := request(t, requests, "--queue", "q", "--max", "1000", "--why", "x")
		wantExit(t, err, ExitRefused)
		if !strings.Contains(err.Error(), "at most 500") || out != "" {
			t.Fatalf("error %v, stdout %q", err, out)
		}
	})
	t.Run("unreachable database", func(t *testing.T) {
		t.Parallel()
		f, _, _ := testFactory(t)
		err := runCmd(NewCmdReplayRequest(f, func(ctx context.Context, o *ReplayRequestOptions) error {
			o.Requests = unreachable[service.Requests]()
			return replayRequestRun(ctx, o)
		}), "--id", "1", "--why", "x")
		wantExit(t, err, ExitUnavailable)
	})
}

func TestReplayShowRun(t *testing.T) {
	t.Parallel()
	show := func(t *testing.T, args ...string) (string, error) {
		t.Helper()
		f, out, _ := testFactory(t)
		requests := fakes.NewRequests("bob", fakes.Request(7, "alice", 3))
		err := runCmd(NewCmdReplayShow(f, func(ctx context.Context, o *ReplayShowOptions) error {
			o.Requests = serve[service.Requests](requests)
			o.Planner = serve[service.Planner](&fakes.Planner{Result: examplePlan()})
			return replayShowRun(ctx, o)
		}), args...)
		return out.String(), err
	}
	t.Run("what the approver approves", func(t *testing.T) {
		t.Parallel()
		out, err := show(t, "7", "--sample", "2")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{strings.Repeat("cd", 32), "alice", "INC-4211 db failover", "Cohort (2 of 3)",
			"#\tLETTER\tCATEGORY\tERROR-CLASS\tRESERVATION\tTARGET\tPAYLOAD-SHA256\tSTATE", "1\t1\ttransient-exhausted\tdb_timeout\tr-1\t"} {
			if !strings.Contains(out, want) {
				t.Errorf("show lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("sample 0 lists the whole cohort", func(t *testing.T) {
		t.Parallel()
		out, err := show(t, "7", "--sample", "0")
		if err != nil || !strings.Contains(out, "Cohort (3 of 3)") {
			t.Fatalf("show = %v:\n%s", err, out)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		out, err := show(t, "7", "-o", "json")
		var d replay.Detail
		if err != nil || json.Unmarshal([]byte(out), &d) != nil || d.ID != 7 || len(d.Sample) != 3 {
			t.Fatalf("json = %+v, %v:\n%s", d, err, out)
		}
	})
	t.Run("not found", func(t *testing.T) {
		t.Parallel()
		_, err := show(t, "8")
		wantExit(t, err, ExitNotFound)
	})
	t.Run("bad arguments", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{}, {"seven"}, {"0"}, {"7", "--sample", "-1"}} {
			_, err := show(t, args...)
			wantExit(t, err, ExitUsage)
		}
	})
}

func TestReplayListRun(t *testing.T) {
	t.Parallel()
	list := func(t *testing.T, requests *fakes.Requests, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		err := runCmd(NewCmdReplayList(f, func(ctx context.Context, o *ReplayListOptions) error {
			o.Requests = serve[service.Requests](requests)
			return replayListRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}
	approved := fakes.Request(2, "carol", 5)
	approved.Status, approved.ReviewedBy = replay.StatusApproved, "bob"
	requests := func() *fakes.Requests { return fakes.NewRequests("bob", fakes.Request(1, "alice", 3), approved) }

	t.Run("newest first", func(t *testing.T) {
		t.Parallel()
		out, _, err := list(t, requests())
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		created := fakes.Request(1, "", 0).CreatedAt.Format(time.RFC3339)
		if len(lines) != 3 || lines[0] != "ID\tKIND\tSTATUS\tITEMS\tRATE\tREQUESTED-BY\tREVIEWED-BY\tCREATED\tOUTCOMES\tWHY" ||
			lines[1] != "2\treplay\tapproved\t5\t20/s\tcarol\tbob\t"+created+"\t-\tINC-4211 db failover" || !strings.HasPrefix(lines[2], "1\treplay\tpending\t") {
			t.Fatalf("list printed:\n%s", out)
		}
	})
	t.Run("by status", func(t *testing.T) {
		t.Parallel()
		out, _, err := list(t, requests(), "--status", "pending")
		if err != nil || strings.Count(strings.TrimSpace(out), "\n") != 1 || !strings.Contains(out, "\tpending\t") {
			t.Fatalf("pending = %v:\n%s", err, out)
		}
	})
	t.Run("none", func(t *testing.T) {
		t.Parallel()
		out, errOut, err := list(t, requests(), "--status", "running")
		if err != nil || out != "" || errOut != "no requests\n" {
			t.Fatalf("none = %v, %q, %q", err, out, errOut)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		out, _, err := list(t, requests(), "-o", "json", "--limit", "1")
		var got []replay.Request
		if err != nil || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || got[0].ID != 2 {
			t.Fatalf("json = %+v, %v:\n%s", got, err, out)
		}
	})
	t.Run("flag errors", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"--status", "waiting"}, {"--limit", "0"}, {"--limit", "10001"}} {
			_, _, err := list(t, requests(), args...)
			wantExit(t, err, ExitUsage)
		}
	})
}

func TestReplayReviewRun(t *testing.T) {
	t.Parallel()
	review := func(t *testing.T, decision replay.Status, actor string, args ...string) (*fakes.Requests, string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		done := fakes.Request(8, "alice", 2)
		done.Status = replay.StatusRejected
		requests := fakes.NewRequests(actor, fakes.Request(7, "alice", 3), done)
		err := runCmd(NewCmdReplayReview(f, decision, func(ctx context.Context, o *ReplayReviewOptions) error {
			o.Requests = serve[service.Requests](requests)
			return replayReviewRun(ctx, o)
		}), args...)
		return requests, out.String(), errOut.String(), err
	}
	hash := strings.Repeat("cd", 32)

	t.Run("approve what was shown", func(t *testing.T) {
		t.Parallel()
		requests, out, errOut, err := review(t, replay.StatusApproved, "bob", "7", "--why", "checked")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(errOut, "approving replay request 7 as shown: 3 letters, cohort hash "+hash+", requested by alice (root)") {
			t.Fatalf("stderr %q does not say what is approved", errOut)
		}
		if out != "replay request 7 is approved by bob\n" {
			t.Fatalf("stdout %q", out)
		}
		if !strings.Contains(errOut, "next: `expiryctl replay run 7` (the approval is valid until "+fakes.Epoch.Add(time.Hour).Format(time.RFC3339)) {
			t.Fatalf("stderr %q names no next step", errOut)
		}
		if got, _ := requests.List(context.Background(), replay.StatusApproved, 10); len(got) != 1 || got[0].ReviewWhy != "checked" {
			t.Fatalf("approved %+v", got)
		}
	})
	t.Run("approve the hash given", func(t *testing.T) {
		t.Parallel()
		_, out, errOut, err := review(t, replay.StatusApproved, "bob", "7", "--cohort-hash", hash)
		if err != nil || strings.Contains(errOut, "approving") || out != "replay request 7 is approved by bob\n" {
			t.Fatalf("approve = %v, %q, %q", err, out, errOut)
		}
	})
	refusals := []struct {
		name, decision, actor string
		args                  []string
		rule                  string
	}{
		{name: "four-eyes", actor: "alice", args: []string{"7"}, rule: "four-eyes"},
		{name: "another hash", actor: "bob", args: []string{"7", "--cohort-hash", strings.Repeat("ab", 32)}, rule: "cohort-hash"},
		{name: "already reviewed", actor: "bob", args: []string{"8", "--cohort-hash", hash}, rule: "single-review"},
		{name: "reject is four-eyes too", decision: "reject", actor: "alice", args: []string{"7", "--why", "no"}, rule: "four-eyes"},
	}
	for _, c := range refusals {
		t.Run("refused: "+c.name, func(t *testing.T) {
			t.Parallel()
			decision := replay.StatusApproved
			if c.decision == "reject" {
				decision = replay.StatusRejected
			}
			_, out, _, err := review(t, decision, c.actor, c.args...)
			wantExit(t, err, ExitRefused)
			if !strings.Contains(err.Error(), c.rule) && !strings.Contains(err.Error(), "reviewed") && !strings.Contains(err.Error(), "cannot review") {
				t.Fatalf("refusal %v does not name the rule %s", err, c.rule)
			}
			if out != "" {
				t.Fatalf("a refusal printed %q", out)
			}
		})
	}
	t.Run("reject", func(t *testing.T) {
		t.Parallel()
		_, out, errOut, err := review(t, replay.StatusRejected, "bob", "7", "--why", "wait for the fix")
		if err != nil || out != "replay request 7 is rejected by bob\n" || errOut != "" {
			t.Fatalf("reject = %v, %q, %q", err, out, errOut)
		}
	})
	t.Run("reject needs why", func(t *testing.T) {
		t.Parallel()
		_, _, _, err := review(t, replay.StatusRejected, "bob", "7")
		wantExit(t, err, ExitUsage)
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		_, out, _, err := review(t, replay.StatusApproved, "bob", "7", "--cohort-hash", hash, "-o", "json")
		var r replay.Request
		if err != nil || json.Unmarshal([]byte(out), &r) != nil || r.Status != replay.StatusApproved || r.ReviewedBy != "bob" {
			t.Fatalf("json = %+v, %v:\n%s", r, err, out)
		}
	})
	t.Run("not found", func(t *testing.T) {
		t.Parallel()
		_, _, _, err := review(t, replay.StatusApproved, "bob", "9")
		wantExit(t, err, ExitNotFound)
	})
}

func TestReplayCancelRun(t *testing.T) {
	t.Parallel()
	f, out, _ := testFactory(t)
	requests := fakes.NewRequests("alice", fakes.Request(7, "alice", 3))
	err := runCmd(NewCmdReplayCancel(f, func(ctx context.Context, o *ReplayCancelOptions) error {
		o.Requests = serve[service.Requests](requests)
		return replayCancelRun(ctx, o)
	}), "7", "--why", "fixed at the source")
	if err != nil || out.String() != "replay request 7 is cancelled\n" {
		t.Fatalf("cancel = %v, %q", err, out)
	}
	f, _, _ = testFactory(t)
	err = runCmd(NewCmdReplayCancel(f, func(ctx context.Context, o *ReplayCancelOptions) error {
		o.Requests = serve[service.Requests](requests)
		return replayCancelRun(ctx, o)
	}), "8")
	wantExit(t, err, ExitNotFound)
}
