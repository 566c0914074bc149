package servicetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/service"
)

// AuditWorld is one audit case's implementation: a reviewer of the trail
// and a recorder that writes to the same trail, each acting as a person of
// its own. The trail may already hold rows when a case starts (a migrated
// database records its migration), so the cases tell their rows apart by
// actor and action, never by counting from an empty trail.
type AuditWorld struct {
	// Reviewer lists and verifies the trail as ReviewerActor: the actor
	// its own audit.list and audit.verify rows record.
	Reviewer      service.AuditReviewer
	ReviewerActor string
	// Recorder writes rows as RecorderActor, the way a command records an
	// action that is not itself a service call.
	Recorder      service.Recorder
	RecorderActor string
}

// AuditReviewer runs the contract of service.AuditReviewer and of the
// service.Recorder that writes the rows it reads: each case gets a world
// of its own from newWorld.
func AuditReviewer(t *testing.T, newWorld func(t *testing.T) AuditWorld) {
	runCases(t, newWorld, []contractCase[AuditWorld]{
		{"ListPagesNewestFirstBySeqAndEndsExactly", auditListPages},
		{"ListRefusesAPageSizeBelowOneAndRecordsTheFailure", auditListLimit},
		{"FiltersMatchActorActionAndTargetExactly", auditFiltersExact},
		{"FiltersKeepTimeAndSeqRanges", auditFiltersRanges},
		{"RecorderWritesAsItsActorWithOutcomeOK", auditRecorderActor},
		{"RecorderIsRefusedAGovernanceActionsOKRow", auditRecorderReserved},
		{"EachListLeavesItsOwnRowForTheNextList", auditListOwnRow},
		{"VerifyCountsAnIntactTrailAndLeavesItsOwnRow", auditVerifyIntact},
		{"VerifyHoldsItsAnchorAndItsFirstSeq", auditVerifyAnchor},
	})
}

// record writes one row through w's recorder per entry, in order.
func record(t *testing.T, w AuditWorld, entries ...audit.Entry) {
	t.Helper()
	for _, e := range entries {
		if err := w.Recorder.Record(context.Background(), e); err != nil {
			t.Fatalf("record %s %s: %v", e.Action, e.Target, err)
		}
	}
}

// recordTargets records one dlq.show row for each target, in order.
func recordTargets(t *testing.T, w AuditWorld, targets ...string) {
	t.Helper()
	for _, target := range targets {
		record(t, w, audit.Entry{Action: "dlq.show", Target: target})
	}
}

// list is one List that must succeed.
func list(t *testing.T, w AuditWorld, f audit.Filter, after *audit.Cursor, limit int) audit.Page {
	t.Helper()
	page, err := w.Reviewer.List(context.Background(), f, after, limit)
	if err != nil {
		t.Fatalf("list %+v after %v limit %d: %v", f, after, limit, err)
	}
	return page
}

// listAll pages through every row matching f, pageSize at a time, and
// fails unless the pages run newest first by seq with no row twice, each
// Next the last row's seq and nil exactly on the last page.
func listAll(t *testing.T, w AuditWorld, f audit.Filter, pageSize int) []audit.Row {
	t.Helper()
	var all []audit.Row
	var after *audit.Cursor
	for {
		page := list(t, w, f, after, pageSize)
		if len(page.Rows) > pageSize {
			t.Fatalf("a page of %d rows, asked for %d", len(page.Rows), pageSize)
		}
		all = append(all, page.Rows...)
		if page.Next == nil {
			break
		}
		if len(page.Rows) != pageSize {
			t.Fatalf("a page of %d rows with a next page, want %d (only the last page is short)", len(page.Rows), pageSize)
		}
		if last := page.Rows[len(page.Rows)-1].Seq; page.Next.Seq != last {
			t.Fatalf("next page after seq %d, want after the page's last row, seq %d", page.Next.Seq, last)
		}
		after = page.Next
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq >= all[i-1].Seq {
			t.Fatalf("seq %d listed after seq %d: want newest (highest seq) first, no row twice", all[i].Seq, all[i-1].Seq)
		}
	}
	return all
}

// targetsOf returns the rows' targets, in order.
func targetsOf(rows []audit.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Target
	}
	return out
}

// detailsOf decodes a row's details.
func detailsOf(t *testing.T, r audit.Row) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(r.Details, &d); err != nil {
		t.Fatalf("seq %d (%s): details %s are not a JSON object: %v", r.Seq, r.Action, r.Details, err)
	}
	return d
}

// newestOwn returns the reviewer's own rows of action, newest first,
// listing them (which leaves one more audit.list row, newer than these).
func newestOwn(t *testing.T, w AuditWorld, action string, limit int) []audit.Row {
	t.Helper()
	return list(t, w, audit.Filter{Actor: w.ReviewerActor, Action: action}, nil, limit).Rows
}

func auditListPages(t *testing.T, w AuditWorld) {
	recordTargets(t, w, "t1", "t2", "t3", "t4", "t5", "t6")
	want := []string{"t6", "t5", "t4", "t3", "t2", "t1"}
	// The reviewer's own rows are written while it pages: the filter
	// leaves them out, and a cursor leaves out whatever is newer.
	f := audit.Filter{Actor: w.RecorderActor}
	for size := 1; size <= 7; size++ {
		if got := targetsOf(listAll(t, w, f, size)); !slices.Equal(got, want) {
			t.Fatalf("pages of %d listed %v, want %v", size, got, want)
		}
	}
	// A page that holds exactly the rest has no next page.
	page := list(t, w, f, nil, 6)
	if len(page.Rows) != 6 || page.Next != nil {
		t.Fatalf("a page of 6 of 6 rows: %d rows, next %v; want 6 and no next page", len(page.Rows), page.Next)
	}
	rest := list(t, w, f, &audit.Cursor{Seq: page.Rows[2].Seq}, 10)
	if got := targetsOf(rest.Rows); !slices.Equal(got, want[3:]) || rest.Next != nil {
		t.Fatalf("after seq %d: %v (next %v), want %v and no next page", page.Rows[2].Seq, got, rest.Next, want[3:])
	}
	// Past the oldest row: nothing, and no next page.
	if end := list(t, w, f, &audit.Cursor{Seq: page.Rows[5].Seq}, 10); len(end.Rows) != 0 || end.Next != nil {
		t.Fatalf("after the oldest row: %d rows, next %v", len(end.Rows), end.Next)
	}
}

func auditListLimit(t *testing.T, w AuditWorld) {
	ctx := context.Background()
	recordTargets(t, w, "t1")
	for _, limit := range []int{0, -1} {
		page, err := w.Reviewer.List(ctx, audit.Filter{}, nil, limit)
		if err == nil {
			t.Fatalf("list with limit %d = %d rows, no error; want a refusal of the page size", limit, len(page.Rows))
		}
		if errors.As(err, new(*audit.ChainError)) {
			t.Fatalf("list with limit %d: %v is a chain error", limit, err)
		}
	}
	// Each refused listing is on the trail, as a failure.
	rows := newestOwn(t, w, "audit.list", 2)
	if len(rows) != 2 {
		t.Fatalf("%d audit.list rows by %s, want the 2 refused listings", len(rows), w.ReviewerActor)
	}
	for i, limit := range []float64{-1, 0} {
		r := rows[i]
		d := detailsOf(t, r)
		if r.Outcome != string(audit.Failed) || d["limit"] != limit || d["error"] == nil {
			t.Fatalf("seq %d: outcome %q, details %s; want outcome %q with limit %v and the error", r.Seq, r.Outcome, r.Details, audit.Failed, limit)
		}
	}
}

func auditFiltersExact(t *testing.T, w AuditWorld) {
	record(t, w,
		audit.Entry{Action: "schema.migrate", Target: "queue:orders"},
		audit.Entry{Action: "schema.migrate.down", Target: "queue:orders"},
		audit.Entry{Action: "schema.migrate", Target: "queue:orders.dlq"},
		audit.Entry{Action: "schema.migrate", Target: "queue:Orders"},
		audit.Entry{Action: "dlq.show", Target: "queue:orders"},
		audit.Entry{Action: "tui.open"},
	)
	type seen struct{ action, target string }
	cases := []struct {
		name   string
		filter audit.Filter
		want   []seen
	}{
		{"action, not a prefix", audit.Filter{Action: "schema.migrate"},
			[]seen{{"schema.migrate", "queue:Orders"}, {"schema.migrate", "queue:orders.dlq"}, {"schema.migrate", "queue:orders"}}},
		{"action, not another case", audit.Filter{Action: "SCHEMA.MIGRATE"}, nil},
		{"target, not a prefix nor another case", audit.Filter{Actor: w.RecorderActor, Target: "queue:orders"},
			[]seen{{"dlq.show", "queue:orders"}, {"schema.migrate.down", "queue:orders"}, {"schema.migrate", "queue:orders"}}},
		{"every set field", audit.Filter{Actor: w.RecorderActor, Action: "schema.migrate", Target: "queue:orders"},
			[]seen{{"schema.migrate", "queue:orders"}}},
		{"the empty target", audit.Filter{Actor: w.RecorderActor, Action: "tui.open"}, []seen{{"tui.open", ""}}},
		{"an action prefix", audit.Filter{Action: "schema."}, nil},
		{"an actor prefix", audit.Filter{Actor: w.RecorderActor[:len(w.RecorderActor)-1]}, nil},
		{"another actor's rows", audit.Filter{Actor: w.ReviewerActor, Action: "schema.migrate"}, nil},
	}
	for _, c := range cases {
		var got []seen
		for _, r := range listAll(t, w, c.filter, 2) {
			if r.Actor != w.RecorderActor {
				t.Fatalf("%s: seq %d by %q, want only %s's rows", c.name, r.Seq, r.Actor, w.RecorderActor)
			}
			got = append(got, seen{r.Action, r.Target})
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s (%+v): listed %v, want %v", c.name, c.filter, got, c.want)
		}
	}
	// The reviewer's own rows are its actor's, and only they are.
	for _, r := range listAll(t, w, audit.Filter{Actor: w.ReviewerActor}, 5) {
		if r.Action != "audit.list" || r.Actor != w.ReviewerActor {
			t.Fatalf("seq %d: %s by %q among %s's rows", r.Seq, r.Action, r.Actor, w.ReviewerActor)
		}
	}
}

func auditFiltersRanges(t *testing.T, w AuditWorld) {
	recordTargets(t, w, "t1", "t2", "t3", "t4")
	rows := list(t, w, audit.Filter{Actor: w.RecorderActor}, nil, 4).Rows // t4 … t1
	if len(rows) != 4 {
		t.Fatalf("listed %d rows, want 4", len(rows))
	}
	for i := 1; i < len(rows); i++ {
		if !rows[i].At.Before(rows[i-1].At) {
			t.Fatalf("seq %d at %v, not before seq %d at %v: a later row is written later", rows[i].Seq, rows[i].At, rows[i-1].Seq, rows[i-1].At)
		}
	}
	cases := []struct {
		name   string
		filter audit.Filter
		want   []string
	}{
		// Since keeps rows at or after it, Until rows before it.
		{"since and until", audit.Filter{Actor: w.RecorderActor, Since: rows[2].At, Until: rows[0].At}, []string{"t3", "t2"}},
		{"since alone", audit.Filter{Actor: w.RecorderActor, Since: rows[1].At}, []string{"t4", "t3"}},
		{"until alone", audit.Filter{Actor: w.RecorderActor, Until: rows[2].At}, []string{"t1"}},
		{"through a seq", audit.Filter{Actor: w.RecorderActor, ThroughSeq: rows[1].Seq}, []string{"t3", "t2", "t1"}},
		{"an empty range", audit.Filter{Actor: w.RecorderActor, Since: rows[1].At, Until: rows[1].At}, nil},
	}
	for _, c := range cases {
		if got := targetsOf(listAll(t, w, c.filter, 3)); !slices.Equal(got, c.want) {
			t.Errorf("%s: listed %v, want %v", c.name, got, c.want)
		}
	}
}

func auditRecorderActor(t *testing.T, w AuditWorld) {
	record(t, w,
		audit.Entry{Actor: "mallory", Action: "tui.open", Target: "queue:orders",
			Details: map[string]any{"n": 1, "why": "INC-1 \"quoted\" — é"}},
		audit.Entry{Action: "metrics.serve"},
		audit.Entry{Actor: "mallory", Action: "replay.approve", Outcome: audit.Refused},
	)
	rows := list(t, w, audit.Filter{Actor: w.RecorderActor}, nil, 10).Rows
	if len(rows) != 3 {
		t.Fatalf("%d rows by %s, want the 3 recorded (whatever the entries' actor)", len(rows), w.RecorderActor)
	}
	if n := len(list(t, w, audit.Filter{Actor: "mallory"}, nil, 10).Rows); n != 0 {
		t.Fatalf("%d rows by mallory, the entries' actor: want none, the recorder's actor is recorded", n)
	}
	refused, nothing, opened := rows[0], rows[1], rows[2]
	if opened.Action != "tui.open" || opened.Target != "queue:orders" || opened.Outcome != string(audit.OK) {
		t.Fatalf("recorded %s %q outcome %q, want tui.open queue:orders outcome ok", opened.Action, opened.Target, opened.Outcome)
	}
	if d := detailsOf(t, opened); d["n"] != float64(1) || d["why"] != "INC-1 \"quoted\" — é" {
		t.Fatalf("details %s, want the entry's", opened.Details)
	}
	// The database adds the build the session named, if any (docs/audit.md,
	// "Which build wrote a row"): the entry's own details are empty.
	d := detailsOf(t, nothing)
	delete(d, "build")
	if len(d) != 0 || nothing.Target != "" || nothing.Outcome != string(audit.OK) {
		t.Fatalf("an entry with no details, target or outcome recorded details %s, target %q, outcome %q; want {}, \"\" and ok",
			nothing.Details, nothing.Target, nothing.Outcome)
	}
	if refused.Action != "replay.approve" || refused.Outcome != string(audit.Refused) {
		t.Fatalf("recorded %s outcome %q, want the entry's outcome refused", refused.Action, refused.Outcome)
	}
	for _, r := range rows {
		if r.Seq <= 0 || r.DBRole == "" || r.At.IsZero() || r.Hash == (audit.Hash{}) {
			t.Fatalf("seq %d recorded with db_role %q, at %v, hash %s: want the trail's own seq, role, time and hash", r.Seq, r.DBRole, r.At, r.Hash)
		}
	}
}

func auditRecorderReserved(t *testing.T, w AuditWorld) {
	ctx := context.Background()
	// Only the database function that makes a governance change writes its
	// "ok" row; a command may still record that one was refused or failed.
	for _, action := range []string{"replay.approve", "replay.request", "policy.set", "access.grant", "dlq.ingest.batch", "dlq.purge.batch"} {
		err := w.Recorder.Record(ctx, audit.Entry{Action: action, Target: "replay_request:1"})
		wantRefusal(t, err, "audit-reserved")
		if err := w.Recorder.Record(ctx, audit.Entry{Action: action, Target: "replay_request:1", Outcome: audit.OK}); err == nil {
			t.Fatalf("%s recorded with outcome ok, want it refused", action)
		}
		for _, outcome := range []audit.Outcome{audit.Refused, audit.Failed} {
			if err := w.Recorder.Record(ctx, audit.Entry{Action: action, Target: "replay_request:1", Outcome: outcome}); err != nil {
				t.Fatalf("%s recorded with outcome %s: %v", action, outcome, err)
			}
		}
	}
	// Spelt otherwise, a reserved action is still reserved; an outcome or
	// an action spelt otherwise is no row at all.
	for _, forged := range []struct {
		action  string
		outcome audit.Outcome
		rule    string
	}{
		{"Replay.Approve ", audit.OK, "audit-reserved"},
		{"access.grant\t", audit.Refused, "audit-reserved"},
		{"audit.checkpoint", audit.OK, "audit-reserved"},
		{"dlq.list", "OK", "audit-outcome"},
		{"dlq.list ", audit.OK, "audit-action"},
		{"replay.run", audit.OK, "audit-action"},
		{"contract.test", audit.Refused, "audit-action"},
	} {
		wantRefusal(t, w.Recorder.Record(ctx, audit.Entry{Action: forged.action, Outcome: forged.outcome}), forged.rule)
	}
	rows := listAll(t, w, audit.Filter{Actor: w.RecorderActor}, 5)
	if len(rows) != 12 {
		t.Fatalf("%d rows recorded, want 12: the refused and failed ones of each action", len(rows))
	}
	for _, r := range rows {
		if r.Outcome == string(audit.OK) {
			t.Fatalf("seq %d: %s recorded with outcome ok", r.Seq, r.Action)
		}
	}
}

func auditListOwnRow(t *testing.T, w AuditWorld) {
	recordTargets(t, w, "t1", "t2", "t3")
	f := audit.Filter{Actor: w.RecorderActor, Target: "t2"}
	first := list(t, w, f, nil, 5)
	everything := list(t, w, audit.Filter{}, nil, 1000)
	if len(everything.Rows) == 0 || everything.Next != nil {
		t.Fatalf("the whole trail: %d rows, next %v", len(everything.Rows), everything.Next)
	}
	// The first listing's row is the newest the second one saw: written
	// after the listing read, so that the listing's page does not hold it.
	own := everything.Rows[0]
	d := detailsOf(t, own)
	filter, _ := d["filter"].(map[string]any)
	if own.Action != "audit.list" || own.Actor != w.ReviewerActor || own.Outcome != string(audit.OK) {
		t.Fatalf("newest row %s by %q outcome %q, want the first listing's audit.list by %s, ok", own.Action, own.Actor, own.Outcome, w.ReviewerActor)
	}
	if d["limit"] != float64(5) || d["returned"] != float64(len(first.Rows)) || filter["actor"] != w.RecorderActor ||
		filter["target"] != "t2" || d["after"] != nil {
		t.Fatalf("audit.list details %s, want the filter, limit 5 and %d returned, no after", own.Details, len(first.Rows))
	}
	if len(first.Rows) != 1 || first.Rows[0].Seq >= own.Seq {
		t.Fatalf("first listing %d rows; its own row is seq %d", len(first.Rows), own.Seq)
	}
	// A continued listing records where it continued from.
	list(t, w, audit.Filter{}, &audit.Cursor{Seq: own.Seq}, 2)
	rows := newestOwn(t, w, "audit.list", 4)
	if len(rows) < 3 {
		t.Fatalf("%d audit.list rows by %s, want the 3 listings", len(rows), w.ReviewerActor)
	}
	if d := detailsOf(t, rows[0]); d["after"] != float64(own.Seq) || d["limit"] != float64(2) || d["returned"] != float64(2) {
		t.Fatalf("continued listing recorded %s, want after %d, limit 2, 2 returned", rows[0].Details, own.Seq)
	}
	if rows[1].Seq != everything.Rows[0].Seq+1 || rows[2].Seq != own.Seq {
		t.Fatalf("audit.list rows %d, %d; want the whole trail's at %d and the first listing's at %d",
			rows[1].Seq, rows[2].Seq, everything.Rows[0].Seq+1, own.Seq)
	}
}

func auditVerifyIntact(t *testing.T, w AuditWorld) {
	ctx := context.Background()
	record(t, w, audit.Entry{Action: "dlq.show", Target: "t1", Details: map[string]any{"n": 1}},
		audit.Entry{Action: "dlq.show", Target: "t2"}, audit.Entry{Action: "dlq.show", Target: "t3", Outcome: audit.Failed})
	before := listAll(t, w, audit.Filter{}, 1000)
	if len(before) == 0 || before[len(before)-1].Seq != 1 {
		t.Fatalf("the trail lists %d rows, want them from seq 1", len(before))
	}
	// The listing's own row is the trail's newest when the check runs.
	head := before[0].Seq + 1
	res, err := w.Reviewer.Verify(ctx, 0, nil)
	if err != nil {
		t.Fatalf("verify an intact trail: %v", err)
	}
	if res.Rows != head || res.From != 1 || res.Head.Seq != head || res.Gaps != 0 {
		t.Fatalf("verified %+v, want %d rows from seq 1, head seq %d, no gaps", res, head, head)
	}
	after := list(t, w, audit.Filter{}, nil, 1000).Rows
	verified, listed := after[0], after[1]
	if verified.Action != "audit.verify" || verified.Actor != w.ReviewerActor || verified.Outcome != string(audit.OK) {
		t.Fatalf("newest row %s by %q outcome %q, want the verification's audit.verify by %s, ok", verified.Action, verified.Actor, verified.Outcome, w.ReviewerActor)
	}
	if d := detailsOf(t, verified); d["rows"] != float64(head) || d["intact"] != true || d["head"] != res.Head.String() {
		t.Fatalf("audit.verify details %s, want rows %d, intact, head %s", verified.Details, head, res.Head)
	}
	// The head is the row the listing wrote, as a listing shows it.
	if listed.Seq != res.Head.Seq || listed.Hash != res.Head.Hash || listed.Action != "audit.list" {
		t.Fatalf("head %s, but seq %d (%s) lists with hash %s", res.Head, listed.Seq, listed.Action, listed.Hash)
	}
	// Each row links to the one before it.
	for i := 0; i+1 < len(after); i++ {
		if after[i].PrevHash != after[i+1].Hash {
			t.Fatalf("seq %d links to %s, seq %d hashes to %s", after[i].Seq, after[i].PrevHash, after[i+1].Seq, after[i+1].Hash)
		}
	}
	if oldest := after[len(after)-1]; oldest.PrevHash != audit.ZeroHash {
		t.Fatalf("seq %d links to %s, want the zero hash", oldest.Seq, oldest.PrevHash)
	}
}

func auditVerifyAnchor(t *testing.T, w AuditWorld) {
	ctx := context.Background()
	recordTargets(t, w, "t1", "t2", "t3")
	first, err := w.Reviewer.Verify(ctx, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// From a later seq: the rows from there, linked to the row before.
	from := first.Head.Seq - 1
	res, err := w.Reviewer.Verify(ctx, from, nil)
	if err != nil || res.From != from || res.Rows != 3 || res.Head.Seq != first.Head.Seq+1 {
		t.Fatalf("verify from %d = %+v, %v; want 3 rows (to the first verification's row) from %d", from, res, err, from)
	}
	// The anchor kept from a verification is met by the trail after it.
	anchor := first.Head
	if res, err := w.Reviewer.Verify(ctx, 0, &anchor); err != nil || res.Head.Seq <= anchor.Seq {
		t.Fatalf("verify with the anchor %s = %+v, %v", anchor, res, err)
	}
	rewritten := audit.Anchor{Seq: anchor.Seq, Hash: audit.Hash{0xde, 0xad}}
	wantChainError(t, w, &rewritten, audit.AnchorMismatch, anchor.Seq)
	past := audit.Anchor{Seq: anchor.Seq + 100, Hash: anchor.Hash}
	wantChainError(t, w, &past, audit.AnchorMissing, past.Seq)

	// A first seq past the end is an error, and not a finding.
	_, err = w.Reviewer.Verify(ctx, anchor.Seq+100, nil)
	if err == nil || errors.As(err, new(*audit.ChainError)) {
		t.Fatalf("verify from past the end = %v, want an error that is not a chain error", err)
	}
	rows := newestOwn(t, w, "audit.verify", 10)
	if len(rows) != 6 {
		t.Fatalf("%d audit.verify rows by %s, want one for each of the 6 verifications", len(rows), w.ReviewerActor)
	}
	wantOutcomes := []audit.Outcome{audit.Failed, audit.Failed, audit.Failed, audit.OK, audit.OK, audit.OK}
	for i, r := range rows {
		if r.Outcome != string(wantOutcomes[i]) {
			t.Errorf("verification %d recorded outcome %q, want %q", 6-i, r.Outcome, wantOutcomes[i])
		}
	}
	if d := detailsOf(t, rows[1]); d["intact"] != false || d["problem"] != string(audit.AnchorMissing) || d["first_bad_seq"] != float64(past.Seq) {
		t.Fatalf("a missing anchor recorded %s, want intact false, problem %s at seq %d", rows[1].Details, audit.AnchorMissing, past.Seq)
	}
}

// wantChainError fails unless verifying with anchor finds problem at seq.
func wantChainError(t *testing.T, w AuditWorld, anchor *audit.Anchor, problem audit.Problem, seq int64) {
	t.Helper()
	_, err := w.Reviewer.Verify(context.Background(), 0, anchor)
	chainErr, ok := errors.AsType[*audit.ChainError](err)
	if !ok {
		t.Fatalf("verify with anchor %s = %v (%T), want a chain error (%s)", anchor, err, err, problem)
	}
	if chainErr.Problem != problem || chainErr.Seq != seq {
		t.Fatalf("verify with anchor %s found %s at seq %d, want %s at seq %d", anchor, chainErr.Problem, chainErr.Seq, problem, seq)
	}
}
