package pgboss_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
	"github.com/expiryctl/expiryctl/internal/fixture/pgbosstest"
)

// TestTestedVersionIsThePinnedPgBoss: the release the driver says it is
// tested with is the one e2e/node/package-lock.json pins, which every
// test here runs.
func TestTestedVersionIsThePinnedPgBoss(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(pgbosstest.NodeDir(t), "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatal(err)
	}
	if got := lock.Packages["node_modules/pg-boss"].Version; got != pgboss.TestedVersion {
		t.Errorf("e2e/node pins pg-boss %q, the driver says it is tested with %q", got, pgboss.TestedVersion)
	}
}

// TestASchemaOlderThanTheDriverIsRefused: a pg-boss schema without a
// column the driver reads (trace_context came with pg-boss 12.36.0) is
// refused when capture or replay opens, naming the release it needs.
func TestASchemaOlderThanTheDriverIsRefused(t *testing.T) {
	t.Parallel()
	db, _ := pgbosstest.New(t, "expiry", nil)
	db.Exec(t, `ALTER TABLE {job} DROP COLUMN trace_context`)
	ref := db.Ref(t, "expiry")
	if _, err := pgboss.OpenSource(context.Background(), ref, pgboss.SourceOptions{}); err == nil || !strings.Contains(err.Error(), "pg-boss 12.36.0 or later") {
		t.Errorf("OpenSource: %v; want it refused, naming pg-boss 12.36.0", err)
	}
	if _, err := pgboss.OpenRetrier(context.Background(), ref, pgboss.RetrierOptions{}); err == nil || !strings.Contains(err.Error(), "pg-boss 12.36.0 or later") {
		t.Errorf("OpenRetrier: %v; want it refused, naming pg-boss 12.36.0", err)
	}
}
