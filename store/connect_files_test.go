package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// TestConnectThroughServiceAndPasswordFiles connects the way
// docs/operations.md tells a user to keep passwords off the command line:
// a URL naming a service of PGSERVICEFILE, and a password found in
// PGPASSFILE for a URL without one. (The local cluster trusts its clients,
// so the password is checked where pgx put it, not by the server.)
func TestConnectThroughServiceAndPasswordFiles(t *testing.T) {
	db := pgtest.New(t)
	dir := t.TempDir()
	services := filepath.Join(dir, "pg_service.conf")
	if err := os.WriteFile(services, []byte("[expiryctl-test]\nhost=127.0.0.1\nport=5432\nuser=postgres\ndbname="+db.Name+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	passwords := filepath.Join(dir, "pgpass")
	if err := os.WriteFile(passwords, []byte("127.0.0.1:5432:"+db.Name+":postgres:from-the-pgpass-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGSERVICEFILE", services)
	t.Setenv("PGPASSFILE", passwords)
	ctx := context.Background()

	pool, err := store.Open(ctx, "postgres:///?service=expiryctl-test&sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var name string
	if err := pool.QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil || name != db.Name {
		t.Fatalf("connected through the service to %q (%v), want %s", name, err, db.Name)
	}
	if got := pool.Config().ConnConfig.Password; got != "from-the-pgpass-file" {
		t.Fatalf("password %q, want the one in PGPASSFILE", got)
	}
}
