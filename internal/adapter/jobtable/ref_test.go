package jobtable_test

import (
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
)

func TestParseRef(t *testing.T) {
	t.Setenv(jobtable.PasswordEnv, "from-env")
	r, err := jobtable.ParseRef("jobtable://ops@Jobs.Internal/reservations/public.expiry_jobs?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	if r.Name() != "jobtable://jobs.internal:5432/reservations/public.expiry_jobs" || r.Table != "public.expiry_jobs" {
		t.Errorf("name %q, table %q", r.Name(), r.Table)
	}
	if r.ConnString != "postgres://ops:from-env@Jobs.Internal/reservations?sslmode=disable" {
		t.Errorf("connection string %q", r.ConnString)
	}
	for _, bad := range []string{"jobtable://h/db", "jobtable://u:secret@h/db/notable", "jobtable:///db/s.t"} {
		_, err := jobtable.ParseRef(bad)
		if err == nil {
			t.Errorf("%s: accepted", bad)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the password: %v", bad, err)
		}
	}
}
