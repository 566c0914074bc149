package commands

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/store"
)

// PingDB says whether PostgreSQL answers on the commands' connections.
func (f *Factory) PingDB(ctx context.Context) error {
	pool, err := f.RawDB(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return pool.Ping(ctx)
}

// followIngest is `dlq ingest --follow`: the capture goes on through a
// restart of RabbitMQ or PostgreSQL, saying on stderr what was lost, for
// how long, and when it tries again; lost is told the server of each
// outage once. It returns the source open at the end, for the caller to
// close and to ask what is left.
func followIngest(ctx context.Context, opts *DLQIngestOptions, ingester service.Ingester, src service.DLQSource,
	run deadletter.IngestOptions, prefetch int, lost func(server string),
) (deadletter.IngestStats, service.DLQSource, error) {
	waits := opts.Backoff
	if waits == nil {
		waits = reconnectWaits
	}
	stats, last, err := deadletter.IngestFollowing(ctx, src, run, deadletter.FollowOptions{
		Ingest: ingester.Ingest,
		Open: func(ctx context.Context) (deadletter.ClosableSource, error) {
			return reopenDLQSource(ctx, opts, prefetch)
		},
		Backoff: waits,
		Server:  sourceServer(opts.Queue),
		Report: func(r deadletter.Reconnect) {
			opts.progress.say(reconnectLine(opts.Queue, r))
			if !r.Back && r.Attempt == 1 {
				lost(r.Server)
			}
		},
	})
	if open, ok := last.(service.DLQSource); ok && open != nil {
		src = open
	}
	return stats, src, err
}

// sourceServer names the server a --queue value is on, as an outage's
// report says it.
func sourceServer(queue string) string { return driverOfQueue(queue).Words().Server }

// reopenDLQSource checks that PostgreSQL answers, then opens a consumer
// on a fresh connection when the last one is gone. An absent server is
// said to be unavailable, to be waited for; anything else ends the
// capture.
func reopenDLQSource(ctx context.Context, opts *DLQIngestOptions, prefetch int) (deadletter.ClosableSource, error) {
	if opts.PingDB != nil {
		if err := opts.PingDB(ctx); err != nil {
			if store.Transient(err) {
				return nil, &deadletter.Unavailable{Server: "PostgreSQL", Err: err}
			}
			return nil, err
		}
	}
	return openWaitableDLQSource(opts.Source, opts.source(), prefetch)
}

// openWaitableDLQSource opens a consumer on queue with open; a broker that
// does not answer is said to be unavailable, for a followed capture to
// wait for.
func openWaitableDLQSource(open func(queue string, prefetch int) (service.DLQSource, error), queue string, prefetch int) (deadletter.ClosableSource, error) {
	src, err := open(queue, prefetch)
	if err != nil {
		if d := driverOfQueue(queue); d.Unreachable(err) {
			return nil, &deadletter.Unavailable{Server: d.Words().Server, Err: err}
		}
		return nil, err
	}
	return src, nil
}

// reconnectLine is one line of an outage on stderr: what was lost and why,
// for how long, what happens to the letters in hand, and the next try.
func reconnectLine(queue string, r deadletter.Reconnect) string {
	down := r.Down.Round(100 * time.Millisecond)
	tries := phrase.Count(r.Attempt, "try", "tries")
	switch {
	case r.Back && r.Server != "PostgreSQL":
		return fmt.Sprintf("reconnected to %s after %s (%s): capturing %s again", r.Server, down, tries, queue)
	case r.Back:
		return fmt.Sprintf("PostgreSQL is back after %s (%s): batches of %s commit again", down, tries, queue)
	case r.Attempt == 1:
		return fmt.Sprintf("lost %s: %s; letters received and not committed were not acknowledged and go back to %s; reconnecting in %s",
			r.Server, errorLine(r.Err), queue, r.Next.Round(10*time.Millisecond))
	default:
		return fmt.Sprintf("%s still unavailable after %s (%s): %s; next try in %s",
			r.Server, down, tries, errorLine(r.Err), r.Next.Round(10*time.Millisecond))
	}
}

// errorLine is err's first line, escaped for the terminal: a connect
// error's advice on further lines is for a command that ends, not for one
// that waits. The tab-indented lines that follow a first line ending in
// ":" are its reasons (pgx gives one per host of a multi-host URL: the
// stopped primary and the replica that is still read-only) and are kept,
// joined by "; ".
func errorLine(err error) string {
	if err == nil {
		return ""
	}
	lines := strings.Split(err.Error(), "\n")
	line := lines[0]
	if strings.HasSuffix(line, ":") {
		var reasons []string
		for _, l := range lines[1:] {
			if !strings.HasPrefix(l, "\t") {
				break
			}
			reasons = append(reasons, strings.TrimSpace(l))
		}
		line += " " + strings.Join(reasons, "; ")
	}
	return termsafe.EscapeLine(line)
}

// source is the queue's name that reaches it, through the Factory.
func (o *DLQIngestOptions) source() string { return o.Queue }
