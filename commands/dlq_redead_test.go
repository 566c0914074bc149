package commands

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
)

// backAfterReplay is an archive in which replay request 7 put letters 2
// and 4 back that died again, request 9 letter 5, and letters 1 and 3 came
// from no replay.
func backAfterReplay() *fakes.Archive {
	var rows []deadletter.Row
	for n := 1; n <= 5; n++ {
		r := fakes.Letter(n)
		r.DeadLetteredAt = fakes.Epoch.Add(-time.Duration(10-n) * time.Minute)
		switch n {
		case 2, 4:
			r.ReplayRequestID = new(int64(7))
		case 5:
			r.ReplayRequestID = new(int64(9))
		}
		rows = append(rows, r)
	}
	return fakes.NewArchive(rows...)
}

func TestDLQListRequest(t *testing.T) {
	t.Parallel()
	out, _, err := dlqList(t, backAfterReplay(), "--request", "7", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []deadletter.Row
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(rows) != 2 || rows[0].ID != 4 || rows[1].ID != 2 || *rows[0].ReplayRequestID != 7 {
		t.Fatalf("--request 7 listed %+v, want letters 4 and 2", rows)
	}
	out, errOut, err := dlqList(t, backAfterReplay(), "--request", "8")
	if err != nil || out != "" || errOut != "no dead letters match\n" {
		t.Fatalf("--request 8 = %v, %q, %q", err, out, errOut)
	}
	_, _, err = dlqList(t, backAfterReplay(), "--request", "-1")
	wantExit(t, err, ExitUsage)
}

func TestDLQSummaryCountsLettersBackAfterReplay(t *testing.T) {
	t.Parallel()
	summary := func(t *testing.T, args ...string) string {
		t.Helper()
		f, out, _ := testFactory(t)
		f.Now = fakes.Now
		err := runCmd(NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
			o.Archive = serve[service.Archive](backAfterReplay())
			o.LiveQueues = serve[service.LiveQueues](&queueReport{report: liveTopology})
			return dlqSummaryRun(ctx, o)
		}), args...)
		if err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	out := summary(t)
	for _, want := range []string{"BACK AFTER REQUEST\tLETTERS\tWAITING\tLAST\n9\t1\t1\t2026-", "\n7\t2\t2\t2026-"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "\n9\t1\t1") > strings.Index(out, "\n7\t2\t2") {
		t.Errorf("the latest request comes first:\n%s", out)
	}
	var report struct {
		Redead []deadletter.RequestRedead `json:"redead_by_request"`
	}
	if err := json.Unmarshal([]byte(summary(t, "-o", "json")), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Redead) != 2 || report.Redead[1].RequestID != 7 || report.Redead[1].Letters != 2 || report.Redead[1].Waiting != 2 {
		t.Fatalf("redead_by_request = %+v", report.Redead)
	}
}
