package replay

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// runLockNamespace is the first key of the advisory lock a runner holds
// ("RPLY"); the second is the request id (its low 32 bits).
const runLockNamespace int32 = 0x52504c59

// runLock is the dedicated session that holds a request's advisory lock.
type runLock struct {
	conn *pgx.Conn
	id   int64
}

// acquire takes the request's advisory lock on a connection of its own, or
// refuses naming who holds it.
func (r *Runner) acquire(ctx context.Context, id int64) (*runLock, error) {
	cfg := r.Pool.Config().ConnConfig.Copy()
	host, _ := os.Hostname()
	cfg.RuntimeParams["application_name"] = truncateText("expiryctl replay run by "+r.Actor+"@"+host, 63)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open the runner's lock session: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1::int4, $2::int4)", runLockNamespace, int32(id)).Scan(&ok); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("take the runner lock of replay request %d: %w", id, err)
	}
	if ok {
		return &runLock{conn: conn, id: id}, nil
	}
	holder := "another session"
	var pid int32
	var app, addr string
	var since time.Time
	err = conn.QueryRow(ctx, `SELECT a.pid, coalesce(a.application_name, ''), coalesce(host(a.client_addr), 'local socket'), a.backend_start
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
		  AND l.classid::int8 = $1 AND l.objid::int8 = $2 LIMIT 1`,
		int64(uint32(runLockNamespace)), int64(uint32(int32(id)))).Scan(&pid, &app, &addr, &since)
	if err == nil {
		holder = fmt.Sprintf("%q (PostgreSQL backend %d from %s, connected %s)", app, pid, addr, since.UTC().Format(time.RFC3339))
	}
	_ = conn.Close(context.WithoutCancel(ctx))
	return nil, refuse("single-runner", "replay request %d is being run by another runner, %s: only one runner may run a request; wait for it to finish, or stop it and run again to resume", id, holder)
}

// status reads the request's status through the lock session, which also
// checks that the session still stands: if PostgreSQL dropped
// it, another runner could take the request, so this one must stop.
func (l *runLock) status(ctx context.Context) (Status, string, error) {
	var status Status
	var reason string
	err := l.conn.QueryRow(ctx, `SELECT status, coalesce(halt_reason, '') FROM expiryctl.replay_requests WHERE id = $1`, l.id).Scan(&status, &reason)
	if err != nil {
		return "", "", fmt.Errorf("the runner's lock session to PostgreSQL failed, so the lease on the request may be lost: %w", err)
	}
	return status, reason, nil
}

func (l *runLock) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Closing the session releases the lock even if the unlock fails.
	_, _ = l.conn.Exec(ctx, "SELECT pg_advisory_unlock($1::int4, $2::int4)", runLockNamespace, int32(l.id))
	_ = l.conn.Close(ctx)
}
