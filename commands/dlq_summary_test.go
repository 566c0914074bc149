package commands

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

// queueReport is a service.LiveQueues that answers with a fixed report,
// or fails, and remembers the work queue it was asked for.
type queueReport struct {
	report deadletter.QueueReport
	err    error
	asked  chan string
}

func (q *queueReport) Topology(_ context.Context, workQueue string) (deadletter.QueueReport, error) {
	if q.asked != nil {
		q.asked <- workQueue
	}
	return q.report, q.err
}

func rate(r float64) *float64 { return &r }

// squash joins the words of s with single spaces, so that a test can find
// a row of an aligned table without counting its padding.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// liveTopology is a broker in an incident: work piling up with no consumer
// left, retries scheduled, letters isolated in the DLQ.
var liveTopology = deadletter.QueueReport{Queues: []deadletter.QueueState{
	{Name: "reservation-expiry", Role: deadletter.RoleWork, Ready: 1840, Unacked: 12, Consumers: 0, PublishRate: rate(31.5)},
	{Name: "reservation-expiry.retry.1000", Role: deadletter.RoleRetry, Ready: 300},
	{Name: "reservation-expiry.retry.5000", Role: deadletter.RoleRetry, Ready: 10},
	{Name: "reservation-expiry.dlq", Role: deadletter.RoleDeadLetter, Ready: 42, HeadAge: func() *time.Duration { d := 95 * time.Second; return &d }(), ClassicVersion: 1},
}, Note: "RabbitMQ's counts, up to 5 s old"}

// incident is an archive whose transient failures arrive faster now than
// over the hour, with holds late by 10 to 40 minutes.
func incident() *fakes.Archive {
	var rows []deadletter.Row
	add := func(n int, ago time.Duration, late time.Duration, class string, c deadletter.Category, attempts int) {
		r := fakes.Letter(n)
		r.DeadLetteredAt = fakes.Epoch.Add(-ago)
		due := fakes.Epoch.Add(-late)
		r.DueAt, r.ErrorClass, r.Category, r.Attempts = &due, class, c, attempts
		rows = append(rows, r)
	}
	for i := range 10 {
		add(i+1, time.Duration(i+1)*20*time.Second, time.Duration(10+i)*time.Minute, "db_timeout", deadletter.TransientExhausted, 3+i%3)
	}
	add(11, 30*time.Minute, 40*time.Minute, "validation", deadletter.Validation, 1)
	add(12, 3*time.Hour, 0, "validation", deadletter.Validation, 1)
	rows[len(rows)-1].DueAt = nil
	return fakes.NewArchive(rows...)
}

func TestDLQSummaryRun(t *testing.T) {
	t.Parallel()
	summary := func(t *testing.T, archive service.Archive, queues service.LiveQueues, tty bool, args ...string) (string, string, *DLQSummaryOptions, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		f.IO.StdoutTTY = tty
		f.Now = fakes.Now
		var opts *DLQSummaryOptions
		err := runCmd(NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
			o.Archive = serve(archive)
			o.LiveQueues = serve(queues)
			o.HoldsGap = nil
			opts = o
			return dlqSummaryRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), opts, err
	}

	t.Run("terminal: is it getting worse, first", func(t *testing.T) {
		t.Parallel()
		out, _, _, err := summary(t, incident(), &queueReport{report: liveTopology}, true)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(out, "\n")
		// 10 letters in 5 minutes (2/min) against 11 in the hour: ×10.9.
		if !strings.HasPrefix(lines[0], "Arrivals   RISING ×10.9: 2.0/min in the last 5 min against 0.2/min over the hour") {
			t.Errorf("the first line should say the arrivals are rising, and how fast:\n%s", out)
		}
		// 10 overdue holds 10…19 minutes late that a retry can fix: rank
		// 5 is 14m, rank 10 19m. The validation letter 40 minutes late
		// failed for good: it is apart, and not in the lateness.
		if !strings.HasPrefix(lines[1], "Overdue    10 holds past due: p50 14m late, p99 19m, max 19m") {
			t.Errorf("the second line should count the overdue holds a retry can fix and their lateness:\n%s", out)
		}
		if !strings.HasPrefix(lines[2], "For good   1 letter past due failed for good (validation 1): no retry fixes them, so they page nobody") {
			t.Errorf("the third line should set the permanent letters apart:\n%s", out)
		}
		if !strings.HasPrefix(lines[3], "At source  not read: the policy sets no gap_query") {
			t.Errorf("the fourth line should say the reservation database was not read, and how to:\n%s", out)
		}
		want := "Queues     reservation-expiry: 1840 ready, 12 in flight (0 consumers) · 310 scheduled in retry queues · 42 isolated in the DLQ"
		if !strings.HasPrefix(lines[4], want) {
			t.Errorf("the fifth line should give the live queue states:\n%s", out)
		}
		// The DLQ is a classic queue of version 1: the summary says how to
		// make it version 2, for that queue alone.
		wantAdvice := "Storage    the DLQ reservation-expiry.dlq is a classic queue of version 1"
		if !strings.Contains(out, wantAdvice) || !strings.Contains(squash(out), `rabbitmqctl set_policy dlq-v2 '^reservation-expiry\.dlq$' '{"queue-version":2}' --apply-to queues`) {
			t.Errorf("the summary should advise version 2 for the DLQ:\n%s", out)
		}
		if !strings.Contains(out, "(RabbitMQ's counts, up to 5 s old)") {
			t.Errorf("the live queue states should say RabbitMQ's counts lag:\n%s", out)
		}
		// Aligned columns, compared here word by word. The category's 10
		// letters in 5 minutes against its 10 in the hour are ×12; its
		// attempts were 3, 4 and 5 in turn.
		for _, want := range []string{
			"transient-exhausted 10 10 3m ago 2.0 rising ×12.0 0.2 0.007 10 3/4/5",
			"validation 2 1 ",
			"db_timeout transient-exhausted 10 10 3/4/5",
			"reservation-expiry.dlq isolated 42 0 0 1m35s",
		} {
			if !strings.Contains(squash(out), want) {
				t.Errorf("the summary lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("piped: tab-separated tables, exact values", func(t *testing.T) {
		t.Parallel()
		out, _, _, err := summary(t, incident(), &queueReport{report: liveTopology}, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"WINDOW\tLETTERS\tPER MINUTE\tTREND\tAGAINST\tRATIO\n5m\t10\t2.0\trising\t1h\t10.909\n",
			"OVERDUE\tLATE P50 S\tLATE P99 S\tLATE MAX S\tOLDEST DUE\tFOR GOOD\n10\t840\t1140\t1140\t2026-11-30T11:41:00Z\t1\n",
			"\nHOLDS PAST DEADLINE\tOLDEST DEADLINE\tOLDEST LATE S\tUNACCOUNTED\tUNAVAILABLE\n-\t-\t-\t-\tthe policy sets no gap_query\n",
			"\nCATEGORY\tWAITING\tOVERDUE\tOLDEST\t5M/MIN\tTREND\t",
			"\ntransient-exhausted\t10\t10\t2026-11-30T11:56:40Z\t2.0\trising ×12.0\t0.2\t0.007\t10\t3/4/5\treservation-expiry-eu.dlq,reservation-expiry.dlq\n",
			"\nQUEUE\tSTATE\tREADY\tIN FLIGHT\tCONSUMERS\tHEAD AGE\n",
			"\nreservation-expiry.dlq\tisolated\t42\t0\t0\t95\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("piped summary lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("json carries everything, durations in seconds", func(t *testing.T) {
		t.Parallel()
		out, _, _, err := summary(t, incident(), &queueReport{report: liveTopology}, false, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			At       time.Time `json:"at"`
			Arrivals struct {
				Last5m struct {
					Letters   int     `json:"letters"`
					PerMinute float64 `json:"per_minute"`
				} `json:"last_5m"`
				Trend struct {
					Direction string   `json:"direction"`
					Ratio     *float64 `json:"ratio"`
				} `json:"trend_5m_vs_1h"`
			} `json:"arrivals"`
			Overdue struct {
				Count int     `json:"count"`
				P50   float64 `json:"lateness_p50_seconds"`
				Max   float64 `json:"lateness_max_seconds"`
			} `json:"overdue"`
			Categories []struct {
				Category string `json:"reason_category"`
				Count    int    `json:"count"`
				Attempts struct {
					P50 int `json:"p50"`
				} `json:"attempts"`
			} `json:"categories"`
			Classes []struct {
				Class string `json:"error_class"`
			} `json:"error_classes"`
			Live struct {
				WorkQueue string `json:"work_queue"`
				Scheduled int    `json:"scheduled"`
				Ready     int    `json:"ready"`
				InFlight  int    `json:"in_flight"`
				Isolated  int    `json:"isolated"`
				Queues    []struct {
					HeadAge *float64 `json:"head_age_seconds"`
				} `json:"queues"`
			} `json:"live_queues"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if !got.At.Equal(fakes.Epoch) || got.Arrivals.Last5m.Letters != 10 || got.Arrivals.Last5m.PerMinute != 2 ||
			got.Arrivals.Trend.Direction != "rising" || got.Arrivals.Trend.Ratio == nil {
			t.Errorf("arrivals: %+v", got.Arrivals)
		}
		if got.Overdue.Count != 10 || got.Overdue.P50 != 840 || got.Overdue.Max != 1140 {
			t.Errorf("overdue: %+v", got.Overdue)
		}
		if len(got.Categories) != 2 || got.Categories[0].Category != "transient-exhausted" || got.Categories[0].Attempts.P50 != 4 ||
			len(got.Classes) != 2 || got.Classes[0].Class != "db_timeout" {
			t.Errorf("categories %+v, classes %+v", got.Categories, got.Classes)
		}
		l := got.Live
		if l.WorkQueue != "reservation-expiry" || l.Scheduled != 310 || l.Ready != 1840 || l.InFlight != 12 || l.Isolated != 42 ||
			len(l.Queues) != 4 || l.Queues[3].HeadAge == nil || *l.Queues[3].HeadAge != 95 {
			t.Errorf("live queues: %+v", l)
		}
	})

	t.Run("an unavailable broker: the rest, and what is missing", func(t *testing.T) {
		t.Parallel()
		down := &queueReport{report: deadletter.QueueReport{Unavailable: "management API at http://127.0.0.1:15672: connection refused"}}
		out, _, _, err := summary(t, incident(), down, true)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "Queues     unavailable (management API at http://127.0.0.1:15672: connection refused)") ||
			!strings.Contains(out, "Overdue    10 holds past due") || !strings.Contains(out, "transient-exhausted") ||
			strings.Contains(out, "QUEUE ") {
			t.Errorf("an unreachable broker should leave a line that says so and the rest as it is:\n%s", out)
		}
		piped, _, _, err := summary(t, incident(), down, false)
		if err != nil || !strings.Contains(piped, "\nLIVE QUEUES\tUNAVAILABLE\nreservation-expiry\tmanagement API at") {
			t.Errorf("piped: %v\n%s", err, piped)
		}
		js, _, _, err := summary(t, incident(), down, false, "-o", "json")
		var got struct {
			Overdue struct{ Count int } `json:"overdue"`
			Live    struct {
				Unavailable string          `json:"unavailable"`
				Ready       *int            `json:"ready"`
				Queues      json.RawMessage `json:"queues"`
			} `json:"live_queues"`
		}
		if err != nil || json.Unmarshal([]byte(js), &got) != nil || got.Overdue.Count != 10 ||
			!strings.Contains(got.Live.Unavailable, "connection refused") || got.Live.Ready != nil || string(got.Live.Queues) != "[]" {
			t.Errorf("json: %v %+v\n%s", err, got, js)
		}
		// A service that could not even be built says so the same way,
		// without its URL's password.
		failing := &queueReport{err: errors.New("dial http://guest:s3cret@127.0.0.1:15672/api: refused")}
		out, _, _, err = summary(t, incident(), failing, true)
		if err != nil || !strings.Contains(out, "Queues     unavailable (") || strings.Contains(out, "s3cret") {
			t.Errorf("a failing LiveQueues: %v\n%s", err, out)
		}
	})

	t.Run("holds past their deadline at their source", func(t *testing.T) {
		t.Parallel()
		withGap := func(t *testing.T, gap replay.HoldsGap, gapErr error, tty bool, args ...string) string {
			t.Helper()
			f, out, _ := testFactory(t)
			f.IO.StdoutTTY = tty
			f.Now = fakes.Now
			err := runCmd(NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
				o.Archive, o.LiveQueues = serve(service.Archive(incident())), serve(service.LiveQueues(&queueReport{report: liveTopology}))
				o.HoldsGap = func(context.Context) (service.HoldsGap, error) {
					return func(context.Context) (replay.HoldsGap, error) { return gap, gapErr }, nil
				}
				return dlqSummaryRun(ctx, o)
			}), args...)
			if err != nil {
				t.Fatal(err)
			}
			return out.String()
		}
		oldest := fakes.Epoch.Add(-2 * time.Hour)
		// 25 holds past their deadline, 11 of them the overdue letters
		// (10 transient, and 1 validation letter, failed for good but its
		// hold still held): 14 no captured letter speaks for.
		gap := replay.HoldsGap{PastDeadline: 25, OldestDeadline: &oldest, At: fakes.Epoch}
		out := withGap(t, gap, nil, true)
		if want := "At source  25 holds past their deadline in the reservation database, the oldest 2h00m late: 14 of them no overdue letter speaks for"; !strings.Contains(squash(out), squash(want)) {
			t.Errorf("the terminal summary lacks %q:\n%s", want, out)
		}
		piped := withGap(t, gap, nil, false)
		if want := "\nHOLDS PAST DEADLINE\tOLDEST DEADLINE\tOLDEST LATE S\tUNACCOUNTED\tUNAVAILABLE\n25\t2026-11-30T10:00:00Z\t7200\t14\t\n"; !strings.Contains(piped, want) {
			t.Errorf("the piped summary lacks %q:\n%s", want, piped)
		}
		var got struct {
			Holds struct {
				Configured  bool     `json:"configured"`
				Past        *int64   `json:"past_deadline"`
				Late        *float64 `json:"oldest_late_seconds"`
				Unaccounted *int64   `json:"unaccounted"`
				Unavailable string   `json:"unavailable"`
			} `json:"holds_at_source"`
		}
		if err := json.Unmarshal([]byte(withGap(t, gap, nil, false, "-o", "json")), &got); err != nil || !got.Holds.Configured ||
			got.Holds.Past == nil || *got.Holds.Past != 25 || *got.Holds.Late != 7200 || *got.Holds.Unaccounted != 14 {
			t.Errorf("json holds_at_source %+v, %v", got.Holds, err)
		}
		// A reservation database that cannot answer: the rest, and why,
		// without the URL's password.
		down := &replay.GapQueryError{Err: errors.New("connect to postgres://reader:hunter2@reservations:5432/db: connection refused")}
		out = withGap(t, replay.HoldsGap{}, down, true)
		if !strings.Contains(out, "At source  unavailable (the policy's gap query failed") || strings.Contains(out, "hunter2") ||
			!strings.Contains(out, "Overdue    10 holds past due") {
			t.Errorf("a reservation database that cannot answer:\n%s", out)
		}
		got.Holds.Past = nil
		if err := json.Unmarshal([]byte(withGap(t, replay.HoldsGap{}, down, false, "-o", "json")), &got); err != nil ||
			got.Holds.Past != nil || !strings.Contains(got.Holds.Unavailable, "connection refused") {
			t.Errorf("json of an unavailable gap %+v, %v", got.Holds, err)
		}
	})

	t.Run("flags bound the counts and name the work queue", func(t *testing.T) {
		t.Parallel()
		archive := incident()
		queues := &queueReport{report: liveTopology, asked: make(chan string, 1)}
		out, _, opts, err := summary(t, archive, queues, true, "--since", "1h", "--until", "2026-11-30T11:58:00Z", "--work-queue", "eu.reservation-expiry")
		if err != nil {
			t.Fatal(err)
		}
		if got := archive.SignalCalls; len(got) != 1 || !got[0].Since.Equal(fakes.Epoch.Add(-time.Hour)) ||
			!got[0].Until.Equal(time.Date(2026, 11, 30, 11, 58, 0, 0, time.UTC)) || opts.WorkQueue != "eu.reservation-expiry" {
			t.Errorf("options: %+v, %q", got, opts.WorkQueue)
		}
		if asked := <-queues.asked; asked != "eu.reservation-expiry" {
			t.Errorf("asked the broker for %q", asked)
		}
		if !strings.HasPrefix(out, "counting letters dead-lettered from 2026-11-30T11:00:00Z to 2026-11-30T11:58:00Z; arrival windows end 2026-11-30T11:58:00Z\n") {
			t.Errorf("a bounded summary should say what it counts first:\n%s", out)
		}
		// Until 11:58, letters 7 to 10 (11:56:40 to 11:57:40) had arrived in the 5 minutes before.
		if !strings.Contains(out, "Arrivals   RISING ×") || !strings.Contains(out, "0.8/min in the last 5 min") {
			t.Errorf("the windows should end at --until:\n%s", out)
		}
	})

	t.Run("empty archive on a terminal says how to fill it", func(t *testing.T) {
		t.Parallel()
		out, errOut, _, err := summary(t, fakes.NewArchive(), &queueReport{report: liveTopology}, true)
		if err != nil || !strings.Contains(errOut, "expiryctl dlq ingest --queue QUEUE") ||
			!strings.Contains(out, "Arrivals   none in the last 24 h") || !strings.Contains(out, "42 isolated in the DLQ") ||
			strings.Contains(out, "CATEGORY") {
			t.Fatalf("empty summary = %v, %q, %q", err, out, errOut)
		}
	})

	t.Run("an empty window is a usage error", func(t *testing.T) {
		t.Parallel()
		_, _, _, err := summary(t, incident(), &queueReport{report: liveTopology}, true, "--since", "1h", "--until", "2h")
		wantExit(t, err, ExitUsage)
	})

	t.Run("unreachable database", func(t *testing.T) {
		t.Parallel()
		f, out, _ := testFactory(t)
		err := runCmd(NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
			o.Archive = unreachable[service.Archive]()
			o.LiveQueues = serve[service.LiveQueues](&queueReport{report: liveTopology})
			return dlqSummaryRun(ctx, o)
		}))
		wantExit(t, err, ExitUnavailable)
		if out.Len() != 0 {
			t.Fatalf("printed %q", out)
		}
	})
}

// TestLiveQueuesUnseenConsumers holds a system that shows nobody consuming
// its queues to null consumers in JSON and "consumers unseen" in text,
// never 0, which would say nothing works the queue.
func TestLiveQueuesUnseenConsumers(t *testing.T) {
	t.Parallel()
	report := deadletter.QueueReport{Queues: []deadletter.QueueState{
		{Name: "work", Role: deadletter.RoleWork, Ready: 3},
		{Name: "work.dlq", Role: deadletter.RoleDeadLetter, Ready: 2},
	}}
	seen := newLiveQueues("work", report)
	if seen.Consumers == nil || *seen.Consumers != 0 || seen.Queues[0].Consumers == nil {
		t.Fatalf("a system that shows its consumers: %+v, want 0 consumers counted", seen)
	}
	unseen := newLiveQueues("work", report.ConsumersUnseen())
	if unseen.Consumers != nil || unseen.Queues[0].Consumers != nil || unseen.Queues[1].Consumers != nil {
		t.Errorf("a system that shows no consumers: %+v, want consumers null", unseen)
	}
	if got := consumersText(unseen.Consumers); got != "consumers unseen" {
		t.Errorf("consumersText(nil) = %q, want \"consumers unseen\"", got)
	}
	if report.Queues[0].ConsumersUnseen {
		t.Error("ConsumersUnseen changed the report it was given")
	}
}
