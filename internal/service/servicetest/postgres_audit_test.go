package servicetest_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/commands"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/service/servicetest"
)

// The audit contract against the trail expiryctl keeps: each case has a
// database of its own; carol reviews it with a login in the auditor group
// alone, and dave records through the Recorder the commands build, with a
// login in the operator group.
func TestAuditReviewerContractPostgres(t *testing.T) {
	t.Parallel()
	servicetest.AuditReviewer(t, func(t *testing.T) servicetest.AuditWorld {
		db := pgtest.New(t)
		carol := db.Login(t, "carol", "expiryctl_auditor")
		dave := db.Login(t, "dave", "expiryctl_operator")
		return servicetest.AuditWorld{
			Reviewer:      &audit.Reviewer{Pool: carol.Pool, Actor: "carol"},
			ReviewerActor: "carol",
			Recorder:      productionRecorder(t, dave.URL, "dave"),
			RecorderActor: "dave",
		}
	})
}

// productionRecorder returns the Recorder the commands use, connected to
// url and acting as actor the way --actor makes it, closed when t ends.
func productionRecorder(t *testing.T, url, actor string) service.Recorder {
	t.Helper()
	f := &commands.Factory{
		IO:              &commands.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard},
		Now:             time.Now,
		Getenv:          func(string) string { return "" },
		DatabaseURLFlag: url,
		ActorFlag:       actor,
	}
	t.Cleanup(f.Close)
	rec, err := f.Recorder(context.Background())
	if err != nil {
		t.Fatalf("build the commands' recorder: %v", err)
	}
	return rec
}
