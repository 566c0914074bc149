package replay

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A running request says whether a runner holds it, to an operator whose
// login is not the runner's (PostgreSQL hides most of another login's
// session from it), through Show, List and the unaudited reads of a watch;
// once its run was interrupted it says its runner is gone and how to
// resume it. A second runner's refusal names the first.
func TestRunnerHeldIsSeenByAnotherOperator(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ids := b.seedN(t, 1, 30)
	req := b.approved(t, NewRequest{Canary: intPtr(0), Rate: 10}, ids)
	pending := b.pending(t, NewRequest{}, b.seedN(t, 100, 1))

	runnerLogin := b.db.Login(t, "runner", "expiryctl_operator")
	first := b.runner(t)
	first.Pool, first.Actor = runnerLogin.Pool, "runner"
	readerLogin := b.db.Login(t, "reader", "expiryctl_operator")
	reader := &Service{Pool: readerLogin.Pool, Actor: "reader"}

	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	done := make(chan error, 1)
	go func() { _, err := first.Run(ctx, req.ID); done <- err }()
	deadline := time.Now().Add(20 * time.Second)
	for b.itemStates(t, req.ID)["confirmed"] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the run confirmed nothing in 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	bg := context.Background()
	d, err := reader.Show(bg, req.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.RunnerHeld == nil || !*d.RunnerHeld || d.RunnerGone() {
		t.Fatalf("while its runner runs it, request %d reads runner_held=%v to another operator", req.ID, d.RunnerHeld)
	}
	if n, err := reader.CountRunnersGone(bg); err != nil || n != 0 {
		t.Errorf("while its runner runs it: %d running requests counted with no runner (%v), want 0", n, err)
	}
	if !strings.Contains(d.Runner, `"expiryctl replay run by runner@`) || !strings.Contains(d.Runner, "of login "+runnerLogin.Name) {
		t.Errorf("the runner is named %q, want its application name and login", d.Runner)
	}
	// A second runner, as the reader's login, is refused naming the first.
	second := b.runner(t)
	second.Pool, second.Actor = readerLogin.Pool, "reader"
	_, err = second.Run(bg, req.ID)
	wantRunRefusal(t, err, "single-runner")
	if r, _ := errors.AsType[*Refusal](err); r == nil || !strings.Contains(r.Message, "replay run by runner@") {
		t.Errorf("the second runner's refusal does not name the first: %v", err)
	}

	interrupt()
	var stopped *InterruptedError
	if err := <-done; !errors.As(err, &stopped) {
		t.Fatalf("the interrupted run returned %v, want an *InterruptedError", err)
	}
	d, err = reader.Show(bg, req.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != StatusRunning || !d.RunnerGone() || d.Runner != "" {
		t.Fatalf("after the interruption: status %s, runner_held %v, runner %q; want running with its runner gone", d.Status, d.RunnerHeld, d.Runner)
	}
	if n, err := reader.CountRunnersGone(bg); err != nil || n != 1 {
		t.Errorf("after the interruption: %d running requests counted with no runner (%v), want 1", n, err)
	}
	doc, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), `"runner_held":false`) {
		t.Errorf("-o json of the request does not say runner_held false: %s", doc)
	}
	if got := d.ResumeCommand(); got != "expiryctl replay run "+strconv.FormatInt(req.ID, 10) {
		t.Errorf("resume command %q", got)
	}

	lists := map[string]func() ([]Request, error){
		"List":             func() ([]Request, error) { return reader.List(bg, "", 10) },
		"Unaudited().List": func() ([]Request, error) { return reader.Unaudited().List(bg, "", 10) },
	}
	for name, list := range lists {
		reqs, err := list()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reqs {
			switch r.ID {
			case req.ID:
				if !r.RunnerGone() {
					t.Errorf("%s: request %d reads runner_held=%v, want its runner gone", name, r.ID, r.RunnerHeld)
				}
			case pending.ID:
				if r.RunnerHeld != nil || r.RunnerGone() {
					t.Errorf("%s: pending request %d reads runner_held=%v, want none", name, r.ID, r.RunnerHeld)
				}
			}
		}
	}
	if d, err := reader.Unaudited().Show(bg, pending.ID, 1); err != nil || d.RunnerHeld != nil {
		t.Errorf("pending request: runner_held %v, %v; want it left out", d.RunnerHeld, err)
	}

	// Resumed, the request has its runner again and completes.
	if res, err := b.runner(t).Run(bg, req.ID); err != nil || res.Status != StatusCompleted || !res.Resumed {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	if d, err := reader.Show(bg, req.ID, 1); err != nil || d.RunnerHeld != nil {
		t.Errorf("completed request: runner_held %v, %v; want it left out", d.RunnerHeld, err)
	}
}
