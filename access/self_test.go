package access_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

func TestSelfOf(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	for _, tc := range []struct {
		person string
		groups []string
		want   []string
	}{
		{"alice", []string{"expiryctl_operator", "expiryctl_ingester"}, []string{"ingester", "operator"}},
		{"bob", []string{"expiryctl_approver"}, []string{"approver"}},
	} {
		l := db.Login(t, tc.person, tc.groups...)
		self, err := access.SelfOf(ctx, l.Pool)
		if err != nil {
			t.Fatal(err)
		}
		if self.Login != l.Name || !slices.Equal(self.Roles, tc.want) || len(self.Bypasses) != 0 {
			t.Errorf("%s: %+v, want login %s roles %v and no bypass", tc.person, self, l.Name, tc.want)
		}
	}
	owner, err := access.SelfOf(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(owner.Bypasses, "owner") && !slices.Contains(owner.Bypasses, "superuser") {
		t.Errorf("the schema's owner: %+v, want it named a way around the rules", owner)
	}
	if strings.TrimSpace(owner.Login) == "" {
		t.Error("no login for the owner")
	}
}
