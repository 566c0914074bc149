package commands

import (
	"context"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
)

func TestAuditListRun(t *testing.T) {
	t.Parallel()
	list := func(t *testing.T, reviewer *fakes.Reviewer, tty bool, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		if tty {
			onTerminal(f, 80, 24)
		}
		f.Now = fakes.Now
		err := runCmd(NewCmdAuditList(f, func(ctx context.Context, o *AuditListOptions) error {
			o.Reviewer = serve[service.AuditReviewer](reviewer)
			return auditListRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}
	t.Run("a page, newest first, exact when piped", func(t *testing.T) {
		t.Parallel()
		reviewer := &fakes.Reviewer{Rows: fakes.AuditRows(5)}
		out, errOut, err := list(t, reviewer, false, "--limit", "2", "--actor", "bob")
		if err != nil {
			t.Fatal(err)
		}
		want := "SEQ\tAT\tACTOR\tDB-ROLE\tACTION\tTARGET\tOUTCOME\tDETAILS\n" +
			"5\t2026-11-30T12:00:00.000000Z\tbob\troot\tdlq.summary\tdead_letter:1\tok\t{\"n\":1}\n" +
			"3\t2026-11-30T11:59:58.000000Z\tbob\troot\treplay.request\tdead_letter:1\tok\t{\"n\":1}\n"
		if out != want {
			t.Fatalf("list printed\n%q\nwant\n%q", out, want)
		}
		if errOut != "next page: --after 3\n" || reviewer.Lists[0].Actor != "bob" {
			t.Fatalf("stderr %q, filter %+v", errOut, reviewer.Lists[0])
		}
	})
	t.Run("the next page's seq on stderr", func(t *testing.T) {
		t.Parallel()
		_, errOut, err := list(t, &fakes.Reviewer{Rows: fakes.AuditRows(7)}, false, "--limit", "3")
		if err != nil || errOut != "next page: --after 5\n" {
			t.Fatalf("list = %v, stderr %q", err, errOut)
		}
	})
	t.Run("a terminal shows ages and cuts details to its width", func(t *testing.T) {
		t.Parallel()
		rows := fakes.AuditRows(1)
		rows[0].Details = []byte(`{"why":"` + strings.Repeat("x", 100) + `"}`)
		out, _, err := list(t, &fakes.Reviewer{Rows: rows}, true)
		if err != nil || !strings.Contains(out, "0s ago") || !strings.Contains(out, "…") || strings.Contains(out, strings.Repeat("x", 100)) {
			t.Fatalf("list = %v:\n%s", err, out)
		}
		assertFits(t, out, 80, []string{"1", "0s ago", "bob", "root", "ok"})
	})
	t.Run("the build that wrote a row, in the table, json and csv", func(t *testing.T) {
		t.Parallel()
		rows := fakes.AuditRows(1)
		rows[0].Details = []byte(`{"build": "v1.2.0 (commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b, modified)", "n": 1}`)
		reviewer := &fakes.Reviewer{Rows: rows}
		out, _, err := list(t, reviewer, false)
		if err != nil || !strings.HasPrefix(out, "SEQ\tAT\tACTOR\tDB-ROLE\tACTION\tTARGET\tOUTCOME\tBUILD\tDETAILS\n") ||
			!strings.Contains(out, "\tok\tv1.2.0 (commit 1a2b3c4d5e6f, modified)\t") {
			t.Fatalf("table = %v:\n%s", err, out)
		}
		out, _, err = list(t, reviewer, false, "-o", "json")
		if err != nil || !strings.Contains(out, `"build": "v1.2.0 (commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b, modified)"`) {
			t.Fatalf("json = %v:\n%s", err, out)
		}
		out, _, err = list(t, reviewer, false, "-o", "csv")
		if err != nil || !strings.HasPrefix(out, "seq,at,actor,db_role,action,target,outcome,details,prev_hash,hash,build\n") ||
			!strings.Contains(out, `,"v1.2.0 (commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b, modified)"`+"\n") {
			t.Fatalf("csv = %v:\n%s", err, out)
		}
	})
	t.Run("json of nothing is an empty array", func(t *testing.T) {
		t.Parallel()
		out, errOut, err := list(t, &fakes.Reviewer{}, false, "-o", "json")
		if err != nil || out != "[]\n" || errOut != "" {
			t.Fatalf("json = %v, %q, %q", err, out, errOut)
		}
	})
	t.Run("nothing matches", func(t *testing.T) {
		t.Parallel()
		out, errOut, err := list(t, &fakes.Reviewer{}, false)
		if err != nil || out != "" || errOut != "no audit rows match\n" {
			t.Fatalf("empty = %v, %q, %q", err, out, errOut)
		}
	})
}
