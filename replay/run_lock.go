package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// runLock is the dedicated session that holds a request's runner lease: a
// row of replay_runner_leases naming the session, which only the schema's
// functions write and which is free once the session ends.
type runLock struct {
	session lockSession
	id      int64
}

// lockHolder is the session that holds a request's runner lock. Address
// and since are empty when PostgreSQL hides them from the reader (another
// login's session, read without pg_read_all_stats).
type lockHolder struct {
	pid                         int32
	login, application, address string
	since                       time.Time
}

// String names the session as a person looks it up: the application name
// the runner set (`expiryctl replay run by ACTOR@HOST`), its login and
// PostgreSQL backend, and where from and since when, where visible.
func (h lockHolder) String() string {
	s := fmt.Sprintf("%q (PostgreSQL backend %d", h.application, h.pid)
	if h.login != "" {
		s += " of login " + h.login
	}
	if h.address != "" {
		s += " from " + h.address
	}
	if !h.since.IsZero() {
		s += ", connected " + h.since.UTC().Format(time.RFC3339)
	}
	return s + ")"
}

// acquire takes the request's runner lease on a connection of its own, or
// refuses naming who holds it.
func (r *Runner) acquire(ctx context.Context, id int64) (*runLock, error) {
	host, _ := os.Hostname()
	application := truncateText("expiryctl replay run by "+r.Actor+"@"+host, 63)
	session, err := openLockSession(ctx, r.Pool, application)
	if err != nil {
		return nil, fmt.Errorf("open the runner's lock session: %w", err)
	}
	t := session.tables()
	ok, err := t.RunLockTry(ctx, id, application)
	if err != nil {
		_ = session.close(context.WithoutCancel(ctx))
		var missing *NotFoundError
		var refusal *Refusal
		if errors.As(err, &missing) || errors.As(err, &refusal) {
			return nil, err
		}
		return nil, fmt.Errorf("take the runner lease of replay request %d: %w", id, err)
	}
	if ok {
		return &runLock{session: session, id: id}, nil
	}
	holder := "another session"
	if held, err := t.RunLockHolders(ctx, []int64{id}); err == nil {
		if h, ok := held[id]; ok {
			holder = h.String()
		}
	}
	_ = session.close(context.WithoutCancel(ctx))
	return nil, refuse("single-runner", "replay request %d is being run by another runner, %s: only one runner may run a request; wait for it to finish, or stop it and run again to resume", id, holder)
}

// status reads the request's status through the lock session, which also
// checks that the session still stands: if PostgreSQL dropped
// it, another runner could take the request, so this one must stop.
func (l *runLock) status(ctx context.Context) (Status, string, error) {
	status, reason, err := l.session.tables().RequestStatus(ctx, l.id)
	if err != nil {
		return "", "", fmt.Errorf("the runner's lock session to PostgreSQL failed, so the lease on the request may be lost: %w", err)
	}
	return status, reason, nil
}

func (l *runLock) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Closing the session frees the lease even if the release fails.
	_ = l.session.tables().RunLockRelease(ctx, l.id)
	_ = l.session.close(ctx)
}
