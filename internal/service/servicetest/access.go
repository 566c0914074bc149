package servicetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

// AccessWorld is one access case's implementation: the service as the
// schema's owner and as a login that is not the owner, and a way to make
// the roles the cases grant to.
type AccessWorld struct {
	// Owner acts as the schema's owner; Member as a login in every group
	// that does not own the schema.
	Owner, Member service.Access
	// NewLogin makes a login role in no group for person and returns its
	// name; NewRole makes a role that cannot log in.
	NewLogin, NewRole func(person string) string
}

// Access runs the access contract: each case gets a world of its own from
// newWorld.
func Access(t *testing.T, newWorld func(t *testing.T) AccessWorld) {
	runCases(t, newWorld, []contractCase[AccessWorld]{
		{"OwnerGrantsAndListShowsGroupsByName", accessOwnerGrants},
		{"GrantingTwiceChangesNothing", accessGrantTwice},
		{"RevokeEndsMembershipAndTheLastLeavesTheList", accessRevoke},
		{"OnlyTheOwnerChangesMembership", accessOwnerOnly},
		{"UnknownOrNoGroupIsRefusedAndChangesNothing", accessGroupRefusals},
		{"GroupsGoToLoginsThatExist", accessLoginRefusals},
	})
}

// membersOf lists the members among logins, by name: a cluster's other
// roles may be members too, and are not the case's.
func membersOf(t *testing.T, svc service.Access, logins ...string) []access.Member {
	t.Helper()
	all, err := svc.List(context.Background())
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var out []access.Member
	for _, m := range all {
		if slices.Contains(logins, m.Login) {
			out = append(out, m)
		}
	}
	if !slices.IsSortedFunc(all, func(a, b access.Member) int { return strings.Compare(a.Login, b.Login) }) {
		t.Errorf("members are not listed by login: %+v", all)
	}
	return out
}

// wantGroups fails unless login is listed with exactly groups, by name.
func wantGroups(t *testing.T, svc service.Access, login string, groups ...string) {
	t.Helper()
	members := membersOf(t, svc, login)
	if len(groups) == 0 {
		if len(members) != 0 {
			t.Fatalf("%s is listed with %v, want it in no group (not listed)", login, members[0].Groups)
		}
		return
	}
	if len(members) != 1 {
		t.Fatalf("%s is listed %d times, want once with %v", login, len(members), groups)
	}
	m := members[0]
	if !slices.Equal(m.Groups, groups) || !m.CanLogin || m.Superuser {
		t.Fatalf("%s listed as %+v, want groups %v, a login, not a superuser", login, m, groups)
	}
}

// wantRefusal fails unless err is a governance refusal by rule.
func wantRefusal(t *testing.T, err error, rule string) {
	t.Helper()
	r, ok := errors.AsType[*replay.Refusal](err)
	if !ok {
		t.Fatalf("got %v (%T), want a refusal by rule %s", err, err, rule)
	}
	if r.Rule != rule {
		t.Fatalf("refused by rule %q (%s), want rule %q", r.Rule, r.Message, rule)
	}
}

func accessOwnerGrants(t *testing.T, w AccessWorld) {
	ctx := context.Background()
	alice, bob := w.NewLogin("alice"), w.NewLogin("bob")
	if err := w.Owner.Grant(ctx, alice, []string{access.Operator, access.Approver}); err != nil {
		t.Fatal(err)
	}
	if err := w.Owner.Grant(ctx, bob, []string{access.Auditor}); err != nil {
		t.Fatal(err)
	}
	// Listed by group name, not in the order granted.
	wantGroups(t, w.Owner, alice, access.Approver, access.Operator)
	wantGroups(t, w.Member, bob, access.Auditor)
	if got := membersOf(t, w.Member, alice, bob); len(got) != 2 || got[0].Login != min(alice, bob) {
		t.Fatalf("members %+v, want %s and %s by name", got, alice, bob)
	}
}

func accessGrantTwice(t *testing.T, w AccessWorld) {
	ctx := context.Background()
	alice := w.NewLogin("alice")
	for range 2 {
		if err := w.Owner.Grant(ctx, alice, []string{access.Operator}); err != nil {
			t.Fatal(err)
		}
	}
	wantGroups(t, w.Owner, alice, access.Operator)
}

func accessRevoke(t *testing.T, w AccessWorld) {
	ctx := context.Background()
	alice := w.NewLogin("alice")
	if err := w.Owner.Grant(ctx, alice, []string{access.Operator, access.Auditor}); err != nil {
		t.Fatal(err)
	}
	if err := w.Owner.Revoke(ctx, alice, []string{access.Operator}); err != nil {
		t.Fatal(err)
	}
	wantGroups(t, w.Owner, alice, access.Auditor)
	// Revoking a group not held is not an error: the membership asked for holds.
	if err := w.Owner.Revoke(ctx, alice, []string{access.Operator, access.Auditor}); err != nil {
		t.Fatal(err)
	}
	wantGroups(t, w.Owner, alice)
}

func accessOwnerOnly(t *testing.T, w AccessWorld) {
	ctx := context.Background()
	alice := w.NewLogin("alice")
	// The database grants access_change to the owner alone: anyone else
	// is refused the function itself.
	wantRefusal(t, w.Member.Grant(ctx, alice, []string{access.Approver}), "role")
	wantGroups(t, w.Owner, alice)
	if err := w.Owner.Grant(ctx, alice, []string{access.Approver}); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, w.Member.Revoke(ctx, alice, []string{access.Approver}), "role")
	wantGroups(t, w.Owner, alice, access.Approver)
}

func accessGroupRefusals(t *testing.T, w AccessWorld) {
	ctx := context.Background()
	alice := w.NewLogin("alice")
	wantRefusal(t, w.Owner.Grant(ctx, alice, nil), "groups")
	wantRefusal(t, w.Owner.Grant(ctx, alice, []string{}), "groups")
	// A known group before an unknown one is not granted either.
	wantRefusal(t, w.Owner.Grant(ctx, alice, []string{access.Operator, "expiryctl_root"}), "groups")
	wantRefusal(t, w.Owner.Grant(ctx, alice, []string{"operators"}), "groups")
	// Another deployment's group is not this one's.
	wantRefusal(t, w.Owner.Grant(ctx, alice, []string{"expiryctl_elsewhere_operator"}), "groups")
	wantGroups(t, w.Owner, alice)
	// A group named by its role alone is this deployment's.
	if err := w.Owner.Grant(ctx, alice, []string{"operator"}); err != nil {
		t.Fatal(err)
	}
	wantGroups(t, w.Owner, alice, access.Operator)
}

func accessLoginRefusals(t *testing.T, w AccessWorld) {
	ctx := context.Background()
	wantRefusal(t, w.Owner.Grant(ctx, "nobody_by_this_name", []string{access.Operator}), "login")
	team := w.NewRole("team")
	wantRefusal(t, w.Owner.Grant(ctx, team, []string{access.Operator}), "login")
	wantGroups(t, w.Owner, team)
}
