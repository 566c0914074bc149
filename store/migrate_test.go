package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	db := pgtest.NewEmpty(t)
	ctx := context.Background()

	if err := store.CheckSchema(ctx, db.Pool); !errors.Is(err, store.ErrSchemaMissing) {
		t.Fatalf("CheckSchema on an empty database = %v, want ErrSchemaMissing", err)
	}

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool := pgtest.Connect(t, db.URL)
			_, errs[i] = store.Migrate(ctx, pool)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate %d: %v", i, err)
		}
	}
	res, err := store.Migrate(ctx, db.Pool)
	if err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if len(res.Applied) != 0 || res.Version != store.LatestVersion() {
		t.Fatalf("second migrate applied %v at version %d, want nothing at %d", res.Applied, res.Version, store.LatestVersion())
	}
	if err := store.CheckSchema(ctx, db.Pool); err != nil {
		t.Fatalf("CheckSchema after migrate: %v", err)
	}
}

func TestCheckSchemaOutdated(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, "DELETE FROM expiryctl.schema_version WHERE version_id = (SELECT max(version_id) FROM expiryctl.schema_version)"); err != nil {
		t.Fatal(err)
	}
	var outdated *store.SchemaOutdatedError
	if err := store.CheckSchema(ctx, db.Pool); !errors.As(err, &outdated) {
		t.Fatalf("CheckSchema = %v, want SchemaOutdatedError", err)
	}
}

func TestOpenUnreachableRedactsPassword(t *testing.T) {
	t.Parallel()
	_, err := store.Open(context.Background(), "postgres://root:topsecret@127.0.0.1:1/expiryctl?connect_timeout=2")
	if err == nil {
		t.Fatal("Open on a closed port succeeded")
	}
	msg := err.Error()
	var connErr *store.ConnectError
	if !errors.As(err, &connErr) {
		t.Fatalf("Open error %T, want *ConnectError", err)
	}
	for _, want := range []string{"127.0.0.1:1", "scripts/services.sh"} {
		if !contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if contains(msg, "topsecret") {
		t.Errorf("error leaks the password: %q", msg)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
