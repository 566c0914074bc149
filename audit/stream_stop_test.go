package audit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestExportStoppedEarlyReadsNoMore: when the reader of an export goes away
// (a closed pipe), the export stops reading the trail too, rather than
// pulling the rest of a long trail off the server to throw it away.
func TestExportStoppedEarlyReadsNoMore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	seedChain(t, db.Pool, 200_000)

	var received atomic.Int64
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return &countingConn{Conn: c, read: &received}, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	if _, err := audit.Export(ctx, pool, io.Discard, audit.NDJSON, audit.Filter{}); err != nil {
		t.Fatal(err)
	}
	whole := received.Swap(0)

	closed := errors.New("write |1: broken pipe")
	_, err = audit.Export(ctx, pool, &failAfter{n: 1 << 20, err: closed}, audit.NDJSON, audit.Filter{})
	if !errors.Is(err, closed) {
		t.Fatalf("export to a closed pipe: %v, want the pipe's error", err)
	}
	if early := received.Load(); early > whole/3 {
		t.Errorf("the export stopped after 1 MiB of output but read %d of the trail's %d bytes from the server", early, whole)
	}
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// failAfter takes n bytes, then fails every write with err.
type failAfter struct {
	n   int
	err error
}

func (w *failAfter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		return 0, w.err
	}
	w.n -= len(p)
	return len(p), nil
}
