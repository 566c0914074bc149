package commands

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

func TestPolicyShowRun(t *testing.T) {
	t.Parallel()
	show := func(t *testing.T, policy *fakes.Policy, args ...string) (string, error) {
		t.Helper()
		f, out, _ := testFactory(t)
		err := runCmd(NewCmdPolicyShow(f, func(ctx context.Context, o *PolicyShowOptions) error {
			o.Policy = serve[service.Policy](policy)
			return policyShowRun(ctx, o)
		}), args...)
		return out.String(), err
	}
	policy := func() *fakes.Policy {
		p := fakes.NewPolicy("carol")
		p.Pending = []replay.PolicyChange{{ID: 3, Changes: map[string]any{"max_rate": 80, "approvers": "bob",
			"approval_ttl": "5400000000 microseconds", "retention": "90 days"}, Why: "more headroom",
			ProposedBy: "dave", ProposedDBRole: "dave", ProposedAt: fakes.Epoch}}
		return p
	}

	t.Run("table with the pending changes", func(t *testing.T) {
		t.Parallel()
		p := policy()
		out, err := show(t, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"KEY\tVALUE\n", "approvers\tbob,carol\n", "max_rate\t50\n", "approval_ttl\t1h\n",
			"canary_window\t30s\n", "retention\t30d\n", "outcome_window\t5m\n", "stop_unsettled_ratio\t0.05\n", "stop_conflict_ratio\t0.2\n", "\nCHANGE\tPROPOSED BY\tAT\tCHANGES\tWHY\n3\tdave (dave)\t2026-11-30T12:00:00Z\tapproval_ttl=1h30m approvers=bob max_rate=80 retention=90d\tmore headroom\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("policy show lacks %q:\n%s", want, out)
			}
		}
		if p.Shows != 1 {
			t.Fatalf("%d audited reads, want 1", p.Shows)
		}
	})
	t.Run("any approver when none are listed", func(t *testing.T) {
		t.Parallel()
		p := policy()
		p.Current.Approvers, p.Pending = nil, nil
		out, err := show(t, p)
		if err != nil || !strings.Contains(out, "approvers\t(any member of expiryctl_approver)\n") || strings.Contains(out, "CHANGE") {
			t.Fatalf("show = %v:\n%s", err, out)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		out, err := show(t, policy(), "-o", "json")
		var got replay.Policy
		var pending struct {
			Pending []replay.PolicyChange `json:"pending_changes"`
		}
		if err != nil || json.Unmarshal([]byte(out), &got) != nil || json.Unmarshal([]byte(out), &pending) != nil ||
			got.MaxRate != 50 || got.ApprovalTTL != time.Hour || len(pending.Pending) != 1 || pending.Pending[0].ID != 3 {
			t.Fatalf("json = %+v %+v, %v:\n%s", got, pending, err, out)
		}
		// Durations are seconds, under names that say so.
		var raw map[string]any
		if err := json.Unmarshal([]byte(out), &raw); err != nil {
			t.Fatal(err)
		}
		for key, want := range map[string]float64{"approval_ttl_seconds": 3600, "canary_window_seconds": 30,
			"outcome_window_seconds": 300, "retention_seconds": 30 * 86400} {
			if raw[key] != want {
				t.Errorf("policy show -o json: %s = %v, want %v", key, raw[key], want)
			}
		}
		for _, old := range []string{"approval_ttl", "canary_window", "outcome_window", "retention"} {
			if v, ok := raw[old]; ok {
				t.Errorf("policy show -o json still has %s = %v", old, v)
			}
		}
	})
}

func TestPolicySetRun(t *testing.T) {
	t.Parallel()
	set := func(t *testing.T, policy *fakes.Policy, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		err := runCmd(NewCmdPolicySet(f, func(ctx context.Context, o *PolicySetOptions) error {
			o.Policy = serve[service.Policy](policy)
			return policySetRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}
	t.Run("an admin proposes", func(t *testing.T) {
		t.Parallel()
		p := fakes.NewPolicy("carol")
		out, errOut, err := set(t, p, "max_rate=80", "approvers=bob,dave", "--why", "more headroom")
		if err != nil {
			t.Fatal(err)
		}
		if out != "policy change 1 proposed\n" || !strings.Contains(errOut, "`expiryctl policy approve 1` (nothing changed yet)") {
			t.Fatalf("stdout %q, stderr %q", out, errOut)
		}
		if len(p.Pending) != 1 || p.Pending[0].Why != "more headroom" || len(p.Changed) != 0 {
			t.Fatalf("pending %+v, changed %v", p.Pending, p.Changed)
		}
		if _, ok := p.Pending[0].Changes["max_rate"]; !ok {
			t.Fatalf("changes %v lack max_rate", p.Pending[0].Changes)
		}
	})
	t.Run("the owner applies at once", func(t *testing.T) {
		t.Parallel()
		p := fakes.NewPolicy("owner")
		p.Owner = true
		out, errOut, err := set(t, p, "max_rate=80")
		if err != nil || errOut != "applied at once: you are the schema owner\n" || !strings.HasPrefix(out, "KEY\tVALUE\n") {
			t.Fatalf("set = %v, %q, %q", err, out, errOut)
		}
	})
	t.Run("flag errors", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{}, {"max_rate"}, {"no_such_key=1"}, {"max_rate=fast"}} {
			p := fakes.NewPolicy("carol")
			_, _, err := set(t, p, args...)
			wantExit(t, err, ExitUsage)
			if len(p.Pending) != 0 {
				t.Fatalf("%v proposed a change", args)
			}
		}
	})
}

func TestPolicyReviewRun(t *testing.T) {
	t.Parallel()
	review := func(t *testing.T, actor string, approve bool, args ...string) (*fakes.Policy, string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		p := fakes.NewPolicy(actor)
		p.Pending = []replay.PolicyChange{{ID: 3, Changes: map[string]any{"max_rate": 80.0}, ProposedBy: "carol"}}
		err := runCmd(NewCmdPolicyReview(f, approve, func(ctx context.Context, o *PolicyReviewOptions) error {
			o.Policy = serve[service.Policy](p)
			return policyReviewRun(ctx, o)
		}), args...)
		return p, out.String(), errOut.String(), err
	}
	t.Run("another admin approves", func(t *testing.T) {
		t.Parallel()
		p, out, errOut, err := review(t, "dave", true, "3", "--why", "agreed")
		if err != nil || errOut != "policy change 3 applied\n" || !strings.HasPrefix(out, "KEY\tVALUE\n") || p.Changed["max_rate"] != 80.0 {
			t.Fatalf("approve = %v, %q, %q, changed %v", err, out, errOut, p.Changed)
		}
	})
	t.Run("the proposer is refused", func(t *testing.T) {
		t.Parallel()
		p, out, _, err := review(t, "carol", true, "3")
		wantExit(t, err, ExitRefused)
		if out != "" || len(p.Changed) != 0 {
			t.Fatalf("a refused approval printed %q and changed %v", out, p.Changed)
		}
	})
	t.Run("reject", func(t *testing.T) {
		t.Parallel()
		p, out, _, err := review(t, "dave", false, "3", "--why", "too fast")
		if err != nil || out != "policy change 3 rejected: the policy is unchanged\n" || len(p.Changed) != 0 || len(p.Pending) != 0 {
			t.Fatalf("reject = %v, %q, changed %v, pending %v", err, out, p.Changed, p.Pending)
		}
	})
	t.Run("unknown change", func(t *testing.T) {
		t.Parallel()
		_, _, _, err := review(t, "dave", true, "4")
		if err == nil || !strings.Contains(err.Error(), "4") {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("flag errors", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			approve bool
			args    []string
		}{{true, nil}, {true, []string{"three"}}, {true, []string{"0"}}, {false, []string{"3"}}} {
			_, _, _, err := review(t, "dave", c.approve, c.args...)
			wantExit(t, err, ExitUsage)
		}
	})
}
