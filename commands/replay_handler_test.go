package commands

import (
	"context"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

func TestReplayRequestHandlerFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		want    replay.NewRequest
	}{
		{name: "neither", args: []string{"--id", "1", "--why", "x"}},
		{name: "same handler with a reason", args: []string{"--id", "1", "--why", "x", "--same-handler-ok", "the database failed over"},
			want: replay.NewRequest{SameHandlerWhy: "the database failed over"}},
		{name: "same handler without one", args: []string{"--id", "1", "--why", "x", "--same-handler-ok", " "}, wantErr: "--same-handler-ok needs a reason"},
		{name: "same handler, empty", args: []string{"--id", "1", "--why", "x", "--same-handler-ok="}, wantErr: "--same-handler-ok needs a reason"},
		{name: "permanent letters", args: []string{"--id", "1", "--why", "x", "--include-permanent"}, want: replay.NewRequest{IncludePermanent: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, _, _ := testFactory(t)
			var got *replay.NewRequest
			err := runCmd(NewCmdReplayRequest(f, func(_ context.Context, o *ReplayRequestOptions) error {
				got = &o.request
				return nil
			}), tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || got != nil {
					t.Fatalf("error = %v (ran %v), want %q", err, got != nil, tc.wantErr)
				}
				wantExit(t, err, ExitUsage)
				return
			}
			if err != nil || got == nil {
				t.Fatalf("error = %v", err)
			}
			if got.SameHandlerWhy != tc.want.SameHandlerWhy || got.IncludePermanent != tc.want.IncludePermanent {
				t.Errorf("request = %+v, want same-handler %q, include-permanent %v", got, tc.want.SameHandlerWhy, tc.want.IncludePermanent)
			}
		})
	}
}

func TestReplayRequestRunSaysWhatTheFlagsLoosen(t *testing.T) {
	t.Parallel()
	f, _, errOut := testFactory(t)
	requests := fakes.NewRequests("alice")
	err := runCmd(NewCmdReplayRequest(f, func(ctx context.Context, o *ReplayRequestOptions) error {
		o.Requests = serve[service.Requests](requests)
		return replayRequestRun(ctx, o)
	}), "--id", "1", "--why", "x", "--same-handler-ok", "INC-1: the database failed over", "--include-permanent")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the run skips the handler check (--same-handler-ok): INC-1: the database failed over",
		"the cohort may hold letters that failed for good (--include-permanent)"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// permanentRequests shows request 7 with two conflict letters, included.
type permanentRequests struct{ *fakes.Requests }

func (p permanentRequests) Show(ctx context.Context, id int64, sample int) (replay.Detail, error) {
	d, err := p.Requests.Show(ctx, id, sample)
	d.Categories[deadletter.Conflict] = 2
	d.PermanentCount = 2
	d.Permanent = []replay.PermanentLetter{
		{DeadLetterID: 11, Category: deadletter.Conflict, ErrorClass: "version_conflict", LastError: "expected version 3, found 4"},
		{DeadLetterID: 12, Category: deadletter.Conflict, ErrorClass: "version_conflict", LastError: "expected version 5, found \x1b[2J7"},
	}
	return d, err
}

func TestReplayShowRunHandlerAndPermanentLetters(t *testing.T) {
	t.Parallel()
	show := func(t *testing.T, requests service.Requests) string {
		t.Helper()
		f, out, _ := testFactory(t)
		err := runCmd(NewCmdReplayShow(f, func(ctx context.Context, o *ReplayShowOptions) error {
			o.Requests = serve(requests)
			return replayShowRun(ctx, o)
		}), "7", "--sample", "1")
		if err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	t.Run("the fix is deployed", func(t *testing.T) {
		t.Parallel()
		out := show(t, fakes.NewRequests("bob", fakes.Request(7, "alice", 3)))
		for _, want := range []string{"failed under         v1 (3 letters)", "consumed now by      queue reservation-expiry: v2 ×1",
			"handler check        passes"} {
			if !strings.Contains(out, want) {
				t.Errorf("show lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("the same handler consumes", func(t *testing.T) {
		t.Parallel()
		requests := fakes.NewRequests("bob", fakes.Request(7, "alice", 3))
		requests.ConsumedNow = &replay.Observation{Queues: []replay.QueueConsumers{{Queue: "reservation-expiry",
			Consumers: []replay.Consumer{{HandlerVersion: "v1"}, {HandlerVersion: ""}}}}}
		out := show(t, requests)
		for _, want := range []string{"consumed now by      queue reservation-expiry: (none advertised) ×1, v1 ×1",
			"handler check        a run would be refused or halt (same-handler)"} {
			if !strings.Contains(out, want) {
				t.Errorf("show lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("the requester allows it, and includes letters that failed for good", func(t *testing.T) {
		t.Parallel()
		r := fakes.Request(7, "alice", 3)
		r.SameHandlerOK, r.SameHandlerWhy, r.IncludePermanent = true, "INC-1: the database failed over", true
		out := show(t, permanentRequests{fakes.NewRequests("bob", r)})
		for _, want := range []string{"handler check        SKIPPED (--same-handler-ok): INC-1: the database failed over",
			"permanent letters    INCLUDED (--include-permanent): 2 letters failed for good",
			"Failed for good (2 letters):", "dead letter 11  conflict     version_conflict  expected version 3, found 4",
			`found \x1b[2J7`} {
			if !strings.Contains(out, want) {
				t.Errorf("show lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "\x1b[2J") {
			t.Error("a letter's error reached the terminal unescaped")
		}
	})
}

func TestReplayApproveSaysWhatTheFlagsLoosen(t *testing.T) {
	t.Parallel()
	r := fakes.Request(7, "alice", 3)
	r.SameHandlerOK, r.SameHandlerWhy, r.IncludePermanent = true, "INC-1: the database failed over", true
	f, _, errOut := testFactory(t)
	err := runCmd(NewCmdReplayReview(f, replay.StatusApproved, func(ctx context.Context, o *ReplayReviewOptions) error {
		o.Requests = serve[service.Requests](permanentRequests{fakes.NewRequests("bob", r)})
		return replayReviewRun(ctx, o)
	}), "7", "--why", "ok")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the requester allows the handler that failed the letters to take them again: INC-1: the database failed over",
		"it includes 2 letters that failed for good"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}
