package deadletter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/expiryctl/expiryctl/store"
)

// ClosableSource is a Source its user closes; closing returns what was not
// acknowledged to the queue.
type ClosableSource interface {
	Source
	Close() error
}

// Unavailable says that a server could not be reached, so that a followed
// ingest waits for it rather than ending. The opener of a FollowOptions
// wraps the errors it knows to be an absent server in it; any other error
// of the opener (a deleted queue, a refused login) ends the ingest.
type Unavailable struct {
	// Server is what could not be reached, as its driver names it
	// ("River's database"), or "PostgreSQL", the archive.
	Server string
	Err    error
}

func (u *Unavailable) Error() string { return u.Server + " is unavailable: " + u.Err.Error() }

func (u *Unavailable) Unwrap() error { return u.Err }

// ErrQueueNotFound is a queue, failed set or table that does not exist on
// its queue system: a driver's error of it says so with errors.Is, and a
// command exits 3 (not found) on it, as for a letter that does not exist.
var ErrQueueNotFound = errors.New("the queue does not exist")

// ServerError is a queue system's server that did not answer, or refused
// the login, when a capture or a run opened it: the server is
// unavailable to this command (exit 5), whatever a followed capture then
// does about it. Server names it as an outage does (the driver's name for
// its server).
type ServerError struct {
	Server string
	Err    error
}

// Error names the server once: not again before an error that begins
// with its name.
func (e *ServerError) Error() string {
	if text := e.Err.Error(); strings.HasPrefix(text, e.Server) {
		return text
	}
	return e.Server + ": " + e.Err.Error()
}

func (e *ServerError) Unwrap() error { return e.Err }

// Reconnect is one event of a followed ingest's outage, for the operator:
// a server lost (Back false: Next is the wait before the next try), or
// reached again (Back true).
type Reconnect struct {
	// Server is what was lost, as Unavailable names it.
	Server string
	// Err is why, while it is down.
	Err error
	// Attempt counts the tries since the server was lost.
	Attempt int
	// Down is how long since it was lost.
	Down time.Duration
	// Next is the wait before the next try.
	Next time.Duration
	Back bool
}

// FollowOptions are what IngestFollowing needs beyond IngestOptions.
type FollowOptions struct {
	// Ingest captures from one source until it ends (deadletter.Ingest
	// with its pool, or a service that wraps it).
	Ingest func(ctx context.Context, src Source, opts IngestOptions) (IngestStats, error)
	// Open opens a fresh consumer, on a fresh connection when the last was
	// lost; an error wrapped in *Unavailable is waited out.
	Open func(ctx context.Context) (ClosableSource, error)
	// Backoff gives a fresh schedule of waits for each outage; the waits
	// of one outage grow from one try to the next, and the schedule must
	// not run out (go-retry's WithMaxRetries would end it).
	Backoff func() retry.Backoff
	// Report is told of each loss, retry and recovery.
	Report func(Reconnect)
	// Sleep waits d or until ctx is done (default a timer).
	Sleep func(ctx context.Context, d time.Duration)
	// Server names the queue system's server the source reads, in what
	// Report is told of a lost source (default "the queue system").
	Server string
}

// IngestFollowing ingests from first, and whenever the queue system or PostgreSQL
// goes away, closes the source (so that the broker redelivers what was
// received and not committed), waits with Backoff and ingests from a
// source Open gives, until ctx is done or an error that no wait cures. Each
// letter is still acknowledged only after its commit, and a letter
// redelivered after a commit whose acknowledgement was lost is skipped as
// a duplicate, so no letter is lost or stored twice. The stats are those of
// every source together; the source open at the end is returned for its
// caller to close.
func IngestFollowing(ctx context.Context, first ClosableSource, opts IngestOptions, follow FollowOptions) (IngestStats, ClosableSource, error) {
	if follow.Sleep == nil {
		follow.Sleep = sleepContext
	}
	if follow.Report == nil {
		follow.Report = func(Reconnect) {}
	}
	start := time.Now()
	var total IngestStats
	src := first
	progress := opts.Progress
	// outage is the loss being waited out, until a batch commits again (or,
	// for a broker, a consumer is open again): tries after a loss that
	// came straight back count on, so the waits grow.
	var outage *Reconnect
	var waits retry.Backoff
	for {
		base := total
		run := opts
		run.Progress = func(s IngestStats) {
			if outage != nil {
				follow.Report(Reconnect{Server: outage.Server, Attempt: outage.Attempt, Down: time.Since(start) - outage.Down, Back: true})
				outage = nil
			}
			if progress != nil {
				progress(sumStats(base, s, time.Since(start)))
			}
		}
		stats, err := follow.Ingest(ctx, src, run)
		total = sumStats(base, stats, time.Since(start))
		server, isLoss := lostServer(err, cmp.Or(follow.Server, "the queue system"))
		if err == nil || ctx.Err() != nil || !isLoss {
			return total, src, err
		}
		_ = src.Close()
		if outage == nil || outage.Server != server {
			// Down holds when it went, as time since start, until Back.
			outage = &Reconnect{Server: server, Down: time.Since(start)}
			waits = follow.Backoff()
		}
		for {
			outage.Attempt++
			wait, _ := waits.Next()
			follow.Report(Reconnect{Server: outage.Server, Err: err, Attempt: outage.Attempt, Down: time.Since(start) - outage.Down, Next: wait})
			follow.Sleep(ctx, wait)
			if ctx.Err() != nil {
				return total, src, nil
			}
			next, openErr := follow.Open(ctx)
			if openErr == nil {
				src = next
				// The broker is back once a consumer is open; PostgreSQL
				// once a batch commits, which the next progress says.
				if outage.Server != "PostgreSQL" {
					follow.Report(Reconnect{Server: outage.Server, Attempt: outage.Attempt, Down: time.Since(start) - outage.Down, Back: true})
					outage = nil
				}
				break
			}
			var unavailable *Unavailable
			if !errors.As(openErr, &unavailable) {
				return total, nil, fmt.Errorf("reconnecting after %s was lost: %w", server, openErr)
			}
			err = unavailable.Err
			if unavailable.Server != outage.Server {
				outage.Server = unavailable.Server
			}
		}
	}
}

// lostServer reports which server err says was lost, if that is all it
// says: a refusal or a bad letter is not waited out.
func lostServer(err error, source string) (string, bool) {
	if err == nil {
		return "", false
	}
	var storeErr *StoreError
	if errors.As(err, &storeErr) {
		return "PostgreSQL", store.Transient(storeErr.Err)
	}
	if errors.Is(err, ErrSourceLost) {
		return source, true
	}
	var unavailable *Unavailable
	if errors.As(err, &unavailable) {
		return unavailable.Server, true
	}
	return "", false
}

func sumStats(base, s IngestStats, elapsed time.Duration) IngestStats {
	return IngestStats{Received: base.Received + s.Received, Stored: base.Stored + s.Stored,
		Duplicates: base.Duplicates + s.Duplicates, Batches: base.Batches + s.Batches, Elapsed: elapsed}
}

func sleepContext(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
