package commands

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

// examplePlan is a plan as the service makes it for R 12/s, p 0.2, n 4,
// acks 30/s and a ceiling of 20/s: amplification 1.2496, bounds 60 and
// 14.9952, suggestion 30/1.2496 − 12 = 12.0077 → 12.00.
func examplePlan() replay.Plan {
	f := func(v float64) *float64 { return &v }
	consumers, ready := 3, int64(40)
	return replay.Plan{Status: replay.StatusPending, Ceiling: 20, WorkQueue: "reservation-expiry",
		TargetQueues: []string{"reservation-expiry"},
		ArrivalRate:  f(12), ArrivalRateSource: "management: publish rate into reservation-expiry",
		FailureFraction: f(0.2), FailureSource: "management: publishes into 2 retry queues of reservation-expiry over its deliveries",
		Attempts: 4, AttemptsSource: "cohort: the most attempts a letter went through (5), less the first",
		Amplification: 1.2496, UpperBound: f(60), PlanningBound: f(14.9952), AckRate: f(30), Consumers: &consumers, Ready: &ready,
		SuggestedRate: f(12), LimitedBy: replay.LimitedByHeadroom, SuggestedUpperBound: f(120), SuggestedPlanningBound: f(29.9904),
		Unavailable: []string{}}
}

func TestReplayPlanFlags(t *testing.T) {
	t.Parallel()
	parse := func(t *testing.T, args ...string) (*ReplayPlanOptions, error) {
		t.Helper()
		f, _, _ := testFactory(t)
		var got *ReplayPlanOptions
		err := runCmd(NewCmdReplayPlan(f, func(_ context.Context, o *ReplayPlanOptions) error { got = o; return nil }), args...)
		return got, err
	}
	o, err := parse(t, "7")
	if err != nil || o.ID != 7 || o.Plan.ArrivalRate != nil || o.Plan.FailureFraction != nil || o.Plan.Retries != nil || o.Plan.WorkQueue != "" {
		t.Fatalf("plan 7 = %+v, %v: nothing given, everything measured", o, err)
	}
	o, err = parse(t, "7", "--work-queue", "q", "--arrival-rate", "0", "--failure-fraction", "0.3", "--retries", "0")
	if err != nil || o.Plan.WorkQueue != "q" || o.Plan.ArrivalRate == nil || *o.Plan.ArrivalRate != 0 ||
		o.Plan.FailureFraction == nil || *o.Plan.FailureFraction != 0.3 || o.Plan.Retries == nil || *o.Plan.Retries != 0 {
		t.Fatalf("given figures = %+v, %v: a zero given is a figure, not a measurement", o.Plan, err)
	}
	for _, args := range [][]string{{}, {"x"}, {"7", "--failure-fraction", "1.5"}, {"7", "--arrival-rate", "-1"},
		{"7", "--retries", "-1"}, {"7", "-o", "csv"}} {
		_, err := parse(t, args...)
		wantExit(t, err, ExitUsage)
	}
}

func TestReplayPlanRun(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, planner *fakes.Planner, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		err := runCmd(NewCmdReplayPlan(f, func(ctx context.Context, o *ReplayPlanOptions) error {
			o.Planner = serve[service.Planner](planner)
			return replayPlanRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}

	t.Run("table: each figure with where it came from", func(t *testing.T) {
		t.Parallel()
		planner := &fakes.Planner{Result: examplePlan()}
		out, errOut, err := run(t, planner, "7", "--retries", "4")
		if err != nil {
			t.Fatal(err)
		}
		if len(planner.IDs) != 1 || planner.IDs[0] != 7 || planner.Options[0].Retries == nil || *planner.Options[0].Retries != 4 {
			t.Fatalf("asked %v %+v", planner.IDs, planner.Options)
		}
		for _, want := range []string{"FIGURE\tVALUE\tFROM\n", "arrival_rate\t12.00\tmanagement: publish rate into reservation-expiry\n",
			"failure_fraction\t0.20\t", "attempts\t4\tcohort:", "upper_bound\t60.00\tR·(1+n)", "planning_bound\t15.00\t",
			"ack_rate\t30.00\tmanagement: acknowledgements on the work queue (3 consumers, 40 ready)\n",
			"suggested_rate\t12.00\theadroom: (R + rate)·1.2496 ≤ ack_rate", "suggested_upper_bound\t120.00\t", "suggested_planning_bound\t29.99\t"} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, out)
			}
		}
		if !strings.Contains(errOut, "plan of replay request 7 (pending): ceiling 20/s, work queue reservation-expiry\n") ||
			!strings.Contains(errOut, "requested 20/s against suggested 12.00/s") {
			t.Errorf("stderr %q", errOut)
		}
	})
	t.Run("json names each figure and what was unavailable", func(t *testing.T) {
		t.Parallel()
		p := examplePlan()
		p.AckRate, p.SuggestedRate, p.SuggestedUpperBound, p.SuggestedPlanningBound, p.LimitedBy = nil, nil, nil, nil, ""
		p.Unavailable = []string{"live view: cannot reach RabbitMQ's management API", "ack_rate: needs the queue's measured traffic"}
		out, _, err := run(t, &fakes.Planner{Result: p}, "7", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		want := map[string]any{"request_id": 7.0, "arrival_rate": 12.0, "failure_fraction": 0.2, "attempts": 4.0, "upper_bound": 60.0,
			"planning_bound": 14.9952, "ack_rate": nil, "suggested_rate": nil, "ceiling": 20.0, "work_queue": "reservation-expiry"}
		for k, v := range want {
			if gv, ok := got[k]; !ok || gv != v {
				t.Errorf("%s = %v (present %v), want %v", k, gv, ok, v)
			}
		}
		if u, _ := got["unavailable"].([]any); len(u) != 2 || !strings.HasPrefix(u[1].(string), "ack_rate:") {
			t.Errorf("unavailable = %v", got["unavailable"])
		}
	})
	t.Run("a discard has no plan", func(t *testing.T) {
		t.Parallel()
		_, _, err := run(t, &fakes.Planner{Err: errors.New("replay request 7 is a discard: it publishes nothing, so there is no rate to plan")}, "7")
		if err == nil || !strings.Contains(err.Error(), "discard") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("not found", func(t *testing.T) {
		t.Parallel()
		_, _, err := run(t, &fakes.Planner{Err: &replay.NotFoundError{ID: 7}}, "7")
		wantExit(t, err, ExitNotFound)
	})
	t.Run("no database", func(t *testing.T) {
		t.Parallel()
		f, _, _ := testFactory(t)
		err := runCmd(NewCmdReplayPlan(f, func(ctx context.Context, o *ReplayPlanOptions) error {
			o.Planner = unreachable[service.Planner]()
			return replayPlanRun(ctx, o)
		}), "7")
		wantExit(t, err, ExitUnavailable)
	})
}

func TestReplayShowEndsWithThePlan(t *testing.T) {
	t.Parallel()
	show := func(t *testing.T, planner *fakes.Planner, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		requests := fakes.NewRequests("bob", fakes.Request(7, "alice", 3))
		err := runCmd(NewCmdReplayShow(f, func(ctx context.Context, o *ReplayShowOptions) error {
			o.Requests = serve[service.Requests](requests)
			o.Planner = serve[service.Planner](planner)
			return replayShowRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}
	out, _, err := show(t, &fakes.Planner{Result: examplePlan()}, "7")
	if err != nil || !strings.Contains(out, "Rate plan") || !strings.Contains(out, "suggested_rate\t12.00\t") ||
		!strings.Contains(out, "requested 20/s against suggested 12.00/s") {
		t.Fatalf("show = %v:\n%s", err, out)
	}
	out, _, err = show(t, &fakes.Planner{Result: examplePlan()}, "7", "-o", "json")
	var d struct {
		replay.Detail
		Plan *replay.Plan `json:"plan"`
	}
	if err != nil || json.Unmarshal([]byte(out), &d) != nil || d.ID != 7 || d.Plan == nil || *d.Plan.SuggestedRate != 12 {
		t.Fatalf("json = %v:\n%s", err, out)
	}
	out, errOut, err := show(t, &fakes.Planner{Err: errors.New("boom")}, "7")
	if err != nil || !strings.Contains(out, "Cohort (3 of 3)") || strings.Contains(out, "Rate plan") || errOut != "no rate plan: boom\n" {
		t.Fatalf("a failed plan must leave the view: %v, %q:\n%s", err, errOut, out)
	}
}
