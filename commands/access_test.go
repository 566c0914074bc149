package commands

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
)

func TestAccessChangeRun(t *testing.T) {
	t.Parallel()
	change := func(t *testing.T, svc *fakes.Access, grant bool, args ...string) (string, error) {
		t.Helper()
		f, out, _ := testFactory(t)
		err := runCmd(NewCmdAccessChange(f, grant, func(ctx context.Context, o *AccessChangeOptions) error {
			o.Access = serve[service.Access](svc)
			return accessChangeRun(ctx, o)
		}), args...)
		return out.String(), err
	}
	t.Run("grant and revoke", func(t *testing.T) {
		t.Parallel()
		svc := &fakes.Access{Owner: true, Logins: []string{"alice"}}
		out, err := change(t, svc, true, "alice", access.Operator, access.Approver)
		if err != nil || out != "expiryctl_operator, expiryctl_approver granted to alice\n" {
			t.Fatalf("grant = %v, %q", err, out)
		}
		out, err = change(t, svc, false, "alice", access.Approver)
		if err != nil || out != "expiryctl_approver revoked from alice\n" {
			t.Fatalf("revoke = %v, %q", err, out)
		}
		if len(svc.Members) != 1 || strings.Join(svc.Members[0].Groups, ",") != access.Operator {
			t.Fatalf("members %+v", svc.Members)
		}
	})
	t.Run("only the owner", func(t *testing.T) {
		t.Parallel()
		out, err := change(t, &fakes.Access{Logins: []string{"alice"}}, true, "alice", access.Operator)
		wantExit(t, err, ExitRefused)
		if out != "" {
			t.Fatalf("printed %q", out)
		}
	})
	t.Run("flag errors", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{}, {"alice"}, {"alice", "expiryctl_root"}} {
			svc := &fakes.Access{Owner: true, Logins: []string{"alice"}}
			_, err := change(t, svc, true, args...)
			wantExit(t, err, ExitUsage)
			if len(svc.Members) != 0 {
				t.Fatalf("%v granted something", args)
			}
		}
	})
}

func TestAccessListRun(t *testing.T) {
	t.Parallel()
	list := func(t *testing.T, args ...string) (string, error) {
		t.Helper()
		f, out, _ := testFactory(t)
		svc := &fakes.Access{Members: []access.Member{
			{Login: "alice", Groups: []string{access.Operator}, CanLogin: true},
			{Login: "postgres", Superuser: true, CanLogin: true},
			{Login: "batch", Groups: []string{access.Ingester}},
			{Login: "dba", CanLogin: true, Bypasses: []string{"createrole", "pg_write_all_data"}},
		}}
		err := runCmd(NewCmdAccessList(f, func(ctx context.Context, o *AccessListOptions) error {
			o.Access = serve[service.Access](svc)
			return accessListRun(ctx, o)
		}), args...)
		return out.String(), err
	}
	out, err := list(t)
	want := "LOGIN\tGROUPS\tNOTE\nalice\texpiryctl_operator\t\npostgres\t\tsuperuser: governance is advisory for this login\nbatch\texpiryctl_ingester\tcannot log in\n" +
		"dba\t\tcreaterole, pg_write_all_data: governance is advisory for this login\n"
	if err != nil || out != want {
		t.Fatalf("list = %v:\n%q\nwant\n%q", err, out, want)
	}
	out, err = list(t, "-o", "json")
	var members []access.Member
	if err != nil || json.Unmarshal([]byte(out), &members) != nil || len(members) != 4 || !members[1].Superuser ||
		strings.Join(members[3].Bypasses, ",") != "createrole,pg_write_all_data" {
		t.Fatalf("json = %+v, %v", members, err)
	}
}
