package replay

import (
	"context"
	"fmt"
)

// RunnerGone reports whether the request is running with no runner: its
// status says running, but no session holds its runner lock, so nothing
// publishes and its counts stay where the last runner left them until
// someone resumes it with `expiryctl replay run`. Only a request read by
// Show or List knows (see RunnerHeld).
func (r Request) RunnerGone() bool {
	return r.Status == StatusRunning && r.RunnerHeld != nil && !*r.RunnerHeld
}

// ResumeCommand is the command that resumes a request whose runner is
// gone: a running request needs no new approval.
func (r Request) ResumeCommand() string { return fmt.Sprintf("expiryctl replay run %d", r.ID) }

func (s *Service) listWithRunners(ctx context.Context, status Status, limit int) ([]Request, error) {
	t := s.tables()
	out, err := t.RequestList(ctx, status, limit)
	if err != nil {
		return nil, err
	}
	if err := markRunners(ctx, t, out); err != nil {
		return nil, err
	}
	return out, markFates(ctx, t, out)
}

// markFates fills in Fates for the replays of reqs that confirmed items.
func markFates(ctx context.Context, t tables, reqs []Request) error {
	var ran []int64
	for _, r := range reqs {
		if r.Kind == KindReplay && r.StartedAt != nil {
			ran = append(ran, r.ID)
		}
	}
	if len(ran) == 0 {
		return nil
	}
	fates, err := t.RequestFates(ctx, ran)
	if err != nil {
		return err
	}
	for i := range reqs {
		if f, ok := fates[reqs[i].ID]; ok {
			reqs[i].Fates = &f
		}
	}
	return nil
}

// markRunners fills in RunnerHeld and Runner for the running requests of
// reqs from their runner leases (replay_runner_leases, which every group
// that reads requests may read), so that every reader sees whether a
// running request still has its runner. A runner ends a run (commits the
// request's new status) before it lets its lease go, so a request whose
// lease was free is read again: if its run
// ended between the two reads, the request as it ended replaces it.
func markRunners(ctx context.Context, t tables, reqs []Request) error {
	var running []int64
	for _, r := range reqs {
		if r.Status == StatusRunning {
			running = append(running, r.ID)
		}
	}
	if len(running) == 0 {
		return nil
	}
	held, err := t.RunLockHolders(ctx, running)
	if err != nil {
		return fmt.Errorf("read which runners hold the running requests: %w", err)
	}
	for i := range reqs {
		if reqs[i].Status != StatusRunning {
			continue
		}
		h, ok := held[reqs[i].ID]
		if ok {
			reqs[i].RunnerHeld, reqs[i].Runner = &ok, h.String()
			continue
		}
		again, err := t.RequestGet(ctx, reqs[i].ID)
		if err != nil {
			return err
		}
		if again.Status == StatusRunning {
			again.RunnerHeld = &ok
		}
		reqs[i] = again
	}
	return nil
}
