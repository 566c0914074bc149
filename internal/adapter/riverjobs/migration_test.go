package riverjobs_test

import (
	"context"
	"testing"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestOldestRiverSchemaSupported captures and retries on River's schema
// at migration 006 (River 0.12.0). Capture reads nothing younger than
// unique_key (005), but River's JobRetry returns unique_states (006): at
// 005 the retrier refuses to open, at 004 the source too.
func TestOldestRiverSchemaSupported(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		version        int
		capture, retry bool
	}{{6, true, true}, {5, true, false}, {4, false, false}} {
		pg := pgtest.NewEmpty(t)
		migrator, err := rivermigrate.New(riverpgxv5.New(pg.Pool), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := migrator.Migrate(context.Background(), rivermigrate.DirectionUp, &rivermigrate.MigrateOpts{TargetVersion: tt.version}); err != nil {
			t.Fatalf("migrate to %d: %v", tt.version, err)
		}
		db := &riverDB{URL: pg.URL, Pool: pg.Pool}
		db.worked(t, "expiry")
		ref := db.ref(t, "expiry")
		src, err := riverjobs.OpenSource(context.Background(), ref, riverjobs.SourceOptions{})
		if err == nil {
			_ = src.Close()
		}
		if (err == nil) != tt.capture {
			t.Errorf("migration %d: OpenSource: %v", tt.version, err)
		}
		r, err := riverjobs.OpenRetrier(context.Background(), ref, riverjobs.RetrierOptions{})
		if (err == nil) != tt.retry {
			t.Errorf("migration %d: OpenRetrier: %v", tt.version, err)
		}
		if err != nil {
			continue
		}
		_ = r.Close()
		db.seed(t, failedJob{})
		d := capture(t, ref, 1)[0]
		if err := publish(t, openRetrier(t, ref), replayOf(d, 42, 1)); err != nil {
			t.Errorf("migration %d: retry: %v", tt.version, err)
		}
		if s := db.job(t, d.Message.MessageID); s.State != "available" {
			t.Errorf("migration %d: the job is %s after its retry", tt.version, s.State)
		}
	}
}
