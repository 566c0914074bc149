package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// TestEveryBypassRoleIsNamed gives one login each way around the rules a
// cluster offers besides superuser and ownership, each also an auditor so
// that it may connect: each reads its own standing as that way, and the
// listing of the cluster's bypassing logins names it, while a plain member
// is governed and not listed.
func TestEveryBypassRoleIsNamed(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	admin := db.Superuser(t)
	plain := db.Login(t, "paula", "expiryctl_auditor")
	cases := []struct {
		person, grant, kind string
	}{
		{"cora", "ALTER ROLE %s CREATEROLE", "createrole"},
		{"walt", "GRANT pg_write_all_data TO %s", "pg_write_all_data"},
		{"rhea", "GRANT pg_read_all_data TO %s", "pg_read_all_data"},
		{"bert", "ALTER ROLE %s BYPASSRLS", "bypassrls"},
		{"gina", "GRANT expiryctl_operator TO %s WITH ADMIN OPTION", "group_admin"},
	}
	logins := map[string]*pgtest.Login{}
	for _, c := range cases {
		l := db.Login(t, c.person, "expiryctl_auditor")
		if _, err := admin.Exec(ctx, strings.ReplaceAll(c.grant, "%s", pgx.Identifier{l.Name}.Sanitize())); err != nil {
			t.Fatal(err)
		}
		logins[c.kind] = l
	}
	listed, err := store.StandingsOf(ctx, plain.Pool)
	if err != nil {
		t.Fatal(err)
	}
	kindsOf := map[string][]string{}
	for _, s := range listed {
		kindsOf[s.Login] = s.Kinds()
	}
	for _, c := range cases {
		l := logins[c.kind]
		// A fresh session: a role's attributes are read at connection.
		pool := pgtest.Connect(t, l.URL)
		st, err := store.LoginStanding(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if st.Governed() || !slices.Contains(st.Kinds(), c.kind) || st.What() == "a governed login" {
			t.Errorf("%s (%s): standing %+v, %q; want it named", c.person, c.kind, st.Kinds(), st.What())
		}
		if !slices.Contains(kindsOf[l.Name], c.kind) {
			t.Errorf("%s (%s) is listed with %v among the bypassing logins, want %s", c.person, c.kind, kindsOf[l.Name], c.kind)
		}
	}
	if st, err := store.LoginStanding(ctx, plain.Pool); err != nil || !st.Governed() {
		t.Errorf("a plain auditor's standing: %+v, %v; want governed", st, err)
	}
	if _, ok := kindsOf[plain.Name]; ok {
		t.Errorf("a plain auditor is listed among the bypassing logins")
	}
}

// TestRelationStandingNamesTheWaysAroundAStoresRules reads, in a database
// of another system's (River's, a team's jobs table's), what a login is
// to one of its tables: the superuser is that, the table's owner is its
// owner, a member of pg_write_all_data is that, and a login granted only
// what a capture needs is none of them.
func TestRelationStandingNamesTheWaysAroundAStoresRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewEmpty(t)
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE public.jobs (id bigint)`); err != nil {
		t.Fatal(err)
	}
	owner, reader, writer := db.Login(t, "olga"), db.Login(t, "rita"), db.Login(t, "will")
	t.Cleanup(func() {
		for _, l := range []*pgtest.Login{owner, reader} {
			_, _ = db.Pool.Exec(context.Background(), "DROP OWNED BY "+pgx.Identifier{l.Name}.Sanitize())
		}
	})
	for _, sql := range []string{
		"ALTER TABLE public.jobs OWNER TO " + pgx.Identifier{owner.Name}.Sanitize(),
		"GRANT SELECT ON public.jobs TO " + pgx.Identifier{reader.Name}.Sanitize(),
		"GRANT pg_write_all_data TO " + pgx.Identifier{writer.Name}.Sanitize(),
		"GRANT CONNECT ON DATABASE " + pgx.Identifier{db.Name}.Sanitize() + " TO PUBLIC",
	} {
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		url  string
		want []string
	}{
		{db.URL, []string{"superuser"}},
		{owner.URL, []string{"owner of public.jobs"}},
		{writer.URL, []string{"pg_write_all_data"}},
		{reader.URL, nil},
	} {
		conn, err := pgx.Connect(ctx, c.url)
		if err != nil {
			t.Fatal(err)
		}
		login, kinds, err := store.RelationStanding(ctx, conn, "public.jobs")
		_ = conn.Close(ctx)
		if err != nil || login == "" || !slices.Equal(kinds, c.want) {
			t.Errorf("%s: login %q, %v (%v); want %v", c.url, login, kinds, err, c.want)
		}
	}
}
