package riverjobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/servers"
)

// privateRiverDB is a River database on a PostgreSQL cluster of the
// test's own, which the test may stop: the machine's main PostgreSQL is
// never restarted.
func privateRiverDB(t *testing.T) (*servers.PostgreSQL, *riverDB) {
	t.Helper()
	pg := servers.StartPostgreSQL(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pg.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE river"); err != nil {
		t.Fatal(err)
	}
	url := pgtest.WithDatabase(pg.AdminURL, "river")
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migrateRiver(t, pool)
	return pg, &riverDB{URL: url, Pool: pool}
}

func TestSourceKeepsGoingAcrossARestartOfRiversDatabase(t *testing.T) {
	t.Parallel()
	pg, db := privateRiverDB(t)
	db.seed(t, failedJob{FinalizedAt: time.Now().Add(-time.Minute)})
	src := openSource(t, db.ref(t, "expiry"), riverjobs.SourceOptions{Poll: 50 * time.Millisecond, Reconnect: time.Minute})
	receive(t, src, 1)

	pg.Stop(t)
	time.Sleep(time.Second) // polls fail meanwhile and are tried again
	pg.Start(t)
	late := db.seed(t, failedJob{})
	got := receive(t, src, 1)[0]
	if got.Message.MessageID != idText(late) {
		t.Errorf("after the restart: job %s, want %d", got.Message.MessageID, late)
	}
	if err := src.Err(); err != nil {
		t.Errorf("Err after a restart: %v", err)
	}
}

func TestSourceReportsALastingLossOfRiversDatabase(t *testing.T) {
	t.Parallel()
	pg, db := privateRiverDB(t)
	db.seed(t, failedJob{})
	src := openSource(t, db.ref(t, "expiry"), riverjobs.SourceOptions{Poll: 50 * time.Millisecond, Reconnect: 2 * time.Second})
	receive(t, src, 1)
	pg.Stop(t)
	select {
	case _, ok := <-src.Deliveries():
		if ok {
			t.Fatal("a delivery from a stopped server")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the deliveries did not end while the database stayed lost")
	}
	if src.Err() == nil {
		t.Error("the deliveries ended with no Err")
	}
	t.Log(src.Err())
}
