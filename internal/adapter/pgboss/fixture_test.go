package pgboss_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
	"github.com/expiryctl/expiryctl/internal/fixture/pgbosstest"
)

// The real pg-boss these tests run, and the databases it runs on, are
// pgbosstest's; what follows is only these tests': their payloads, and a
// source of the driver's own to capture with.

// wait bounds every wait of these tests on a source or a retrier.
const wait = pgbosstest.Wait

// reservations are the payloads of reservations r-from … r-(from+n-1).
func reservations(from, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"reservation_id":"r-%d","idempotency_key":"expire:r-%d:v1"}`, from+i, from+i)
	}
	return out
}

// openSource opens a source on ref that polls often, closed when tb ends.
func openSource(tb testing.TB, ref pgboss.Ref, opts pgboss.SourceOptions) *pgboss.Source {
	tb.Helper()
	if opts.Poll == 0 {
		opts.Poll = 20 * time.Millisecond
	}
	src, err := pgboss.OpenSource(context.Background(), ref, opts)
	if err != nil {
		tb.Fatalf("OpenSource: %v", err)
	}
	tb.Cleanup(func() { _ = src.Close() })
	return src
}

// receive takes n deliveries from src, failing tb when they do not come
// within wait.
func receive(tb testing.TB, src *pgboss.Source, n int) []deadletter.Delivery {
	tb.Helper()
	got := make([]deadletter.Delivery, 0, n)
	deadline := time.After(wait)
	for len(got) < n {
		select {
		case d, ok := <-src.Deliveries():
			if !ok {
				tb.Fatalf("deliveries ended after %d of %d: %v", len(got), n, src.Err())
			}
			got = append(got, d)
		case <-deadline:
			tb.Fatalf("received %d of %d jobs", len(got), n)
		}
	}
	return got
}

// capture takes the n failed jobs the queue holds through a source of
// its own.
func capture(tb testing.TB, ref pgboss.Ref, n int) []deadletter.Delivery {
	tb.Helper()
	src := openSource(tb, ref, pgboss.SourceOptions{})
	got := receive(tb, src, n)
	_ = src.Close()
	return got
}
