package broker_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/secrettest"
)

// testManagementURL is the management API of the test broker:
// EXPIRYCTL_TEST_MANAGEMENT_URL, or the one the test AMQP URL implies.
func testManagementURL(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("EXPIRYCTL_TEST_MANAGEMENT_URL"); u != "" {
		return u
	}
	u, err := broker.ManagementURLFor(amqptest.URL())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// withPassword returns rawURL with its userinfo password replaced by pw.
func withPassword(t *testing.T, rawURL, pw string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String()
}

func TestManagementURLFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ amqpURL, want string }{
		{broker.DefaultURL, "http://guest:guest@127.0.0.1:15672/"},
		// amqp091's defaults: guest/guest, port 5672; the vhost is not the API's.
		{"amqp://rabbit.internal", "http://guest:guest@rabbit.internal:15672/"},
		{"amqp://ops:s3cret@rabbit:5673/prod", "http://ops:s3cret@rabbit:15672/"},
		{"amqps://ops:s3cret@rabbit/prod", "https://ops:s3cret@rabbit:15671/"},
		// A password keeps its meaning: decoded by the AMQP parser, encoded again.
		{"amqp://ops:p%40ss%2Fw0rd@rabbit/", "http://ops:p%40ss%2Fw0rd@rabbit:15672/"},
		{"amqp://u:p@[::1]:5672/", "http://u:p@[::1]:15672/"},
	} {
		got, err := broker.ManagementURLFor(tc.amqpURL)
		if err != nil || got != tc.want {
			t.Errorf("ManagementURLFor(%q) = %q, %v; want %q", tc.amqpURL, got, err, tc.want)
		}
	}
	_, err := broker.ManagementURLFor("http://u:S3cretPW@rabbit/")
	if err == nil || strings.Contains(err.Error(), "S3cretPW") || !strings.Contains(err.Error(), "invalid AMQP URL") {
		t.Errorf("ManagementURLFor of an http URL: %v", err)
	}
}

// TestTopologyReadsTheLiveQueues builds a topology on the real broker with
// known contents, a consumer holding two messages unacknowledged, and
// decoys whose names come close, and waits until the management API's
// statistics (refreshed every 5 s) show exactly those contents.
func TestTopologyReadsTheLiveQueues(t *testing.T) {
	t.Parallel()
	conn := amqptest.Dial(t)
	work := amqptest.Name(t, ".work")
	// Long TTLs so nothing expires during the test; their names sort
	// differently as text ("3600000" < "600000") and as TTLs.
	retryShort, retryLong, dlq := work+".retry.600000", work+".retry.3600000", work+".dlq"
	decoys := []string{work + ".retry.soon", work + ".retry.600000x", work + "x", work + ".dlq.old", "x" + work}
	queues := append([]string{work, retryShort, retryLong, dlq}, decoys...)
	amqptest.DeleteOnCleanup(t, queues, nil)

	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		var args amqp.Table
		switch q {
		case retryShort:
			args = amqp.Table{"x-message-ttl": int64(600000)}
		case retryLong:
			args = amqp.Table{"x-message-ttl": int64(3600000), "x-queue-version": int32(2)}
		}
		if _, err := ch.QueueDeclare(q, false, false, false, false, args); err != nil {
			t.Fatalf("declare %s: %v", q, err)
		}
	}
	deadLetteredAt := time.Now().Add(-90 * time.Second)
	publish := func(queue string, n int, timestamp time.Time) {
		t.Helper()
		for i := range n {
			msg := amqp.Publishing{Body: []byte(`{"reservation_id":"r-1"}`)}
			if i == 0 {
				msg.Timestamp = timestamp
			}
			c, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, true, false, msg)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := c.WaitContext(context.Background()); !ok || err != nil {
				t.Fatalf("publish to %s not confirmed: %v", queue, err)
			}
		}
	}
	publish(work, 5, time.Time{})
	publish(retryShort, 4, time.Time{})
	publish(retryLong, 1, time.Time{})
	publish(dlq, 6, deadLetteredAt)
	for _, q := range decoys {
		publish(q, 1, time.Time{})
	}

	// A consumer that takes two and acknowledges none: two in flight.
	consumer, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := consumer.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := consumer.Consume(work, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-deliveries:
		case <-time.After(10 * time.Second):
			t.Fatal("the consumer got no delivery")
		}
	}

	m := broker.NewManagement(broker.ManagementConfig{URL: testManagementURL(t), AMQPURL: amqptest.URL()})
	type counts struct {
		Name      string
		Role      deadletter.QueueRole
		Ready     int64
		Unacked   int64
		Consumers int
	}
	want := []counts{
		{work, deadletter.RoleWork, 3, 2, 1},
		{retryShort, deadletter.RoleRetry, 4, 0, 0},
		{retryLong, deadletter.RoleRetry, 1, 0, 0},
		{dlq, deadletter.RoleDeadLetter, 6, 0, 0},
	}
	var report deadletter.QueueReport
	var got []counts
	for deadline := time.Now().Add(30 * time.Second); ; {
		report, err = m.Topology(context.Background(), work)
		if err != nil {
			t.Fatal(err)
		}
		if report.Unavailable != "" {
			t.Fatalf("management API unavailable: %s\n(scripts/services.sh enables it)", report.Unavailable)
		}
		if !strings.Contains(report.Note, "5 s old") {
			t.Errorf("the report's note %q does not say the API's counts lag", report.Note)
		}
		got = got[:0]
		for _, q := range report.Queues {
			got = append(got, counts{q.Name, q.Role, q.Ready, q.Unacked, q.Consumers})
		}
		// The rates come with the broker's next stats emission, which may
		// follow the counts by a few seconds.
		if equalCounts(got, want) && ratesShown(report, work, dlq) {
			break
		}
		if time.Now().After(deadline) {
			if !equalCounts(got, want) {
				t.Fatalf("after 30 s the management API shows\n%+v\nwant\n%+v", got, want)
			}
			break // the rates' own checks below say which is missing
		}
		time.Sleep(500 * time.Millisecond)
	}

	byName := map[string]deadletter.QueueState{}
	for _, q := range report.Queues {
		byName[q.Name] = q
	}
	// The classic queues' storage versions: RabbitMQ's default of 1, and
	// the 2 the long retry queue asked for. A DLQ of version 1 is the one
	// `dlq summary` advises moving to version 2.
	if v := byName[work].ClassicVersion; v != 1 {
		t.Errorf("%s: classic queue version %d, want RabbitMQ 3.10's default 1", work, v)
	}
	if v := byName[retryLong].ClassicVersion; v != 2 {
		t.Errorf("%s: classic queue version %d, want the 2 it was declared with", retryLong, v)
	}
	if !byName[dlq].PagesUnderCapture() || byName[work].PagesUnderCapture() {
		t.Errorf("PagesUnderCapture: DLQ %v, work queue %v; want only the DLQ of version 1", byName[dlq].PagesUnderCapture(), byName[work].PagesUnderCapture())
	}
	if age := byName[dlq].HeadAge; age == nil || *age < 89*time.Second || *age > 150*time.Second {
		t.Errorf("DLQ head age %v, want about 90 s (its head message's timestamp)", fmtAge(age))
	}
	for _, q := range []string{work, retryShort} {
		if age := byName[q].HeadAge; age != nil {
			t.Errorf("%s: head age %v for a head message without a timestamp", q, *age)
		}
	}
	for _, q := range []string{work, dlq} {
		if byName[q].PublishRate == nil {
			t.Errorf("%s: no publish rate after publishing to it", q)
		}
	}
	if byName[work].DeliverRate == nil {
		t.Errorf("%s: no deliver rate after delivering from it", work)
	}
}

// ratesShown reports whether the report has a publish rate for work and
// dlq, and a deliver rate for work.
func ratesShown(report deadletter.QueueReport, work, dlq string) bool {
	shown := 0
	for _, q := range report.Queues {
		switch q.Name {
		case work:
			if q.PublishRate != nil && q.DeliverRate != nil {
				shown++
			}
		case dlq:
			if q.PublishRate != nil {
				shown++
			}
		}
	}
	return shown == 2
}

func equalCounts[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func fmtAge(age *time.Duration) string {
	if age == nil {
		return "none"
	}
	return age.String()
}

// TestTopologyUnavailable: whatever stands between expiryctl and the
// queues, Topology says what is missing and how to fix it, returns no
// error, and never shows a password.
func TestTopologyUnavailable(t *testing.T) {
	t.Parallel()
	const pw = "S3cretPW-0f-mgmt"
	mgmt := testManagementURL(t)
	// amqpHost is the test broker's AMQP URL with path and no credentials.
	amqpHost := func(path string) string {
		u, err := url.Parse(amqptest.URL())
		if err != nil {
			t.Fatal(err)
		}
		u.Path, u.User = path, nil
		return u.String()
	}
	for _, tc := range []struct {
		name          string
		cfg           broker.ManagementConfig
		work          string
		want          []string
		hidden        []string
		fasterThan    time.Duration
		rawInPassword bool
	}{
		// An AMQP URL without a password of its own, so that only pw is
		// scrubbed and the messages can be read whole.
		{name: "unreachable port",
			cfg: broker.ManagementConfig{URL: "http://guest:" + pw + "@127.0.0.1:1/", AMQPURL: amqpHost("/")},
			want: []string{"cannot reach RabbitMQ's management API at http://127.0.0.1:1/ (dial tcp 127.0.0.1:1: connect: connection refused)",
				"rabbitmq-plugins enable rabbitmq_management"}},
		{name: "wrong password",
			cfg:  broker.ManagementConfig{URL: withPassword(t, mgmt, pw), AMQPURL: amqpHost("/")},
			want: []string{"authentication failed", `refused user "guest"`}},
		{name: "wrong password, derived from the AMQP URL",
			cfg:  broker.ManagementConfig{AMQPURL: "amqp://ops:" + pw + "@127.0.0.1:5672/"},
			want: []string{"at http://127.0.0.1:15672/ refused user \"ops\": authentication failed"}},
		{name: "wrong password from the AMQP URL",
			cfg:  broker.ManagementConfig{URL: strings.Replace(mgmt, "guest:guest@", "", 1), AMQPURL: "amqp://guest:" + pw + "@127.0.0.1:5672/"},
			want: []string{"authentication failed"}},
		{name: "no such vhost",
			cfg:  broker.ManagementConfig{URL: mgmt, AMQPURL: amqpHost("/no-such-vhost")},
			want: []string{`has no vhost "no-such-vhost"`, "path of --amqp-url"}},
		{name: "no such queue", work: "no-such-queue-anywhere",
			cfg:  broker.ManagementConfig{URL: mgmt, AMQPURL: amqptest.URL()},
			want: []string{`has no queue no-such-queue-anywhere`, "no-such-queue-anywhere.dlq"}},
		{name: "not the management API",
			cfg:  broker.ManagementConfig{URL: "ftp://guest:" + pw + "@127.0.0.1:15672/", AMQPURL: amqpHost("/")},
			want: []string{"invalid management URL ftp://guest:xxxxx@127.0.0.1:15672/"}},
		// net/url quotes what it takes for the port: the head of the password.
		{name: "a raw / in the password", rawInPassword: true,
			cfg:  broker.ManagementConfig{URL: "http://guest:S3cret/" + pw + "@127.0.0.1:1/", AMQPURL: amqptest.URL()},
			want: []string{"invalid management URL"}, hidden: []string{"S3cret"}},
		{name: "an invalid AMQP URL",
			cfg:  broker.ManagementConfig{AMQPURL: "amqp://guest:" + pw + " @127.0.0.1:5672/"},
			want: []string{"invalid AMQP URL amqp://guest:xxxxx@127.0.0.1:5672/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			work := tc.work
			if work == "" {
				work = "reservation-expiry"
			}
			start := time.Now()
			report, err := broker.NewManagement(tc.cfg).Topology(context.Background(), work)
			if err != nil {
				t.Fatalf("Topology returned an error: %v", err)
			}
			if time.Since(start) > broker.DefaultManagementTimeout+time.Second {
				t.Errorf("took %v", time.Since(start))
			}
			if report.Unavailable == "" || len(report.Queues) > 0 {
				t.Fatalf("report %+v, want it unavailable", report)
			}
			for _, w := range tc.want {
				if !strings.Contains(report.Unavailable, w) {
					t.Errorf("Unavailable does not say %q:\n%s", w, report.Unavailable)
				}
			}
			for _, form := range append(secrettest.Forms(pw, tc.rawInPassword, 4), tc.hidden...) {
				if secrettest.CountOutsideMasks(report.Unavailable, form) > 0 {
					t.Errorf("Unavailable shows %q:\n%s", form, report.Unavailable)
				}
			}
		})
	}
}

// TestTopologyReadsWhat310Returns serves the answer RabbitMQ 3.10 gave to
// Topology's query (captured with curl) and checks what the request asked
// and what Topology makes of the answer.
func TestTopologyReadsWhat310Returns(t *testing.T) {
	t.Parallel()
	var gotPath, gotQuery, gotUser, gotPassword string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery = r.URL.EscapedPath(), r.URL.RawQuery
		gotUser, gotPassword, _ = r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(rabbit310Page))
	}))
	t.Cleanup(srv.Close)
	now := time.Unix(1764590000, 0)
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("monitor", "s3cret")
	u.Path = "/rabbit/"
	m := broker.NewManagement(broker.ManagementConfig{URL: u.String(), AMQPURL: "amqp://guest:guest@127.0.0.1:5672/", Now: func() time.Time { return now }})
	report, err := m.Topology(context.Background(), "reservation-expiry")
	if err != nil || report.Unavailable != "" {
		t.Fatalf("Topology: %v, %q", err, report.Unavailable)
	}
	if gotPath != "/rabbit/api/queues/%2F" {
		t.Errorf("path %q, want the vhost %%2F under the base path", gotPath)
	}
	q, _ := url.ParseQuery(gotQuery)
	if !strings.Contains(q.Get("columns"), "message_stats.deliver_get_details.rate") || q.Get("name") != `^reservation-expiry(\.retry\.[0-9]+|\.dlq)?$` {
		t.Errorf("query %q", gotQuery)
	}
	if gotUser != "monitor" || gotPassword != "s3cret" {
		t.Errorf("basic auth %q:%q, want the management URL's", gotUser, gotPassword)
	}
	var names []string
	for _, s := range report.Queues {
		names = append(names, s.Name+"/"+string(s.Role))
	}
	if want := "reservation-expiry/work reservation-expiry.retry.1000/retry reservation-expiry.retry.30000/retry reservation-expiry.dlq/dead-letter"; strings.Join(names, " ") != want {
		t.Fatalf("queues %v, want %s", names, want)
	}
	work, retry, dlq := report.Queues[0], report.Queues[1], report.Queues[3]
	if work.Ready != 3 || work.Unacked != 2 || work.Consumers != 1 || work.HeadAge != nil {
		t.Errorf("work queue %+v", work)
	}
	if work.PublishRate == nil || *work.PublishRate != 2.4 || *work.DeliverRate != 2.2 || *work.AckRate != 1.8 {
		t.Errorf("work queue rates %v %v %v", work.PublishRate, work.DeliverRate, work.AckRate)
	}
	if retry.PublishRate != nil || retry.AckRate != nil {
		t.Errorf("a queue without message_stats has rates %v %v", retry.PublishRate, retry.AckRate)
	}
	if dlq.HeadAge == nil || *dlq.HeadAge != 90*time.Second {
		t.Errorf("DLQ head age %s, want 90s", fmtAge(dlq.HeadAge))
	}
	// Milliseconds from a Node.js producer read as what they mean.
	if ms := report.Queues[2].HeadAge; ms == nil || *ms != 5*time.Second {
		t.Errorf("head age from a millisecond timestamp %s, want 5s", fmtAge(ms))
	}
}

// rabbit310Page is the shape of RabbitMQ 3.10.8's answer to Topology's
// query: a page object; head_message_timestamp null for a classic queue
// whose head message has no timestamp and absent for a quorum queue;
// message_stats absent on a queue without traffic since the broker started
// sampling it; and decoys the broker's filter would not have let through.
const rabbit310Page = `{"filtered_count":6,"item_count":6,"items":[
 {"consumers":1,"head_message_timestamp":null,"message_stats":{"ack_details":{"rate":1.8},"deliver_get_details":{"rate":2.2},"publish_details":{"rate":2.4}},"messages_ready":3,"messages_unacknowledged":2,"name":"reservation-expiry"},
 {"consumers":0,"head_message_timestamp":null,"messages_ready":0,"messages_unacknowledged":0,"name":"reservation-expiry.dlq.old"},
 {"consumers":0,"head_message_timestamp":1764589910,"message_stats":{"publish_details":{"rate":0.2}},"messages_ready":7,"messages_unacknowledged":0,"name":"reservation-expiry.dlq"},
 {"consumers":0,"head_message_timestamp":1764589995000,"messages_ready":1,"messages_unacknowledged":0,"name":"reservation-expiry.retry.30000"},
 {"consumers":0,"head_message_timestamp":null,"messages_ready":4,"messages_unacknowledged":0,"name":"reservation-expiry.retry.1000"},
 {"consumers":0,"messages_ready":1,"messages_unacknowledged":0,"name":"reservation-expiry.retry.+5"}
],"page":1,"page_count":1,"page_size":500,"total_count":9}`

// TestTopologyTimeout: an API that accepts the connection and never
// answers costs the timeout, not the caller's patience; a caller that gives
// up gets its own context's error.
func TestTopologyTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	m := broker.NewManagement(broker.ManagementConfig{URL: srv.URL, AMQPURL: broker.DefaultURL, Timeout: 200 * time.Millisecond})

	start := time.Now()
	report, err := m.Topology(context.Background(), "reservation-expiry")
	if err != nil || !strings.Contains(report.Unavailable, "did not answer within 200ms") {
		t.Errorf("Topology = %+v, %v; want unavailable after 200ms", report, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v with a 200ms timeout", took)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := m.Topology(ctx, "reservation-expiry"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Topology: %v, want context.Canceled", err)
	}
}

// TestTopologyEstimatesAQuorumQueuesHead: RabbitMQ 3.10 reports no head
// timestamp for a quorum queue; its ready messages over its ack rate stand
// in for the oldest job's age, marked as an estimate, and nothing stands
// in with nothing acked. A classic queue's null timestamp (a head message
// without one) is not estimated: the broker did look.
func TestTopologyEstimatesAQuorumQueuesHead(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"items":[
 {"consumers":2,"message_stats":{"ack_details":{"rate":2.0}},"messages_ready":120,"messages_unacknowledged":2,"name":"q","type":"quorum"},
 {"consumers":0,"messages_ready":7,"messages_unacknowledged":0,"name":"q.dlq","type":"quorum"},
 {"consumers":0,"head_message_timestamp":null,"message_stats":{"ack_details":{"rate":1.0}},"messages_ready":4,"messages_unacknowledged":0,"name":"q.retry.1000","type":"classic"}
],"page":1,"page_count":1,"page_size":500,"total_count":3}`))
	}))
	t.Cleanup(srv.Close)
	m := broker.NewManagement(broker.ManagementConfig{URL: srv.URL + "/", AMQPURL: "amqp://guest:guest@127.0.0.1:5672/"})
	report, err := m.Topology(context.Background(), "q")
	if err != nil || report.Unavailable != "" || len(report.Queues) != 3 {
		t.Fatalf("Topology: %+v, %v", report, err)
	}
	work, retry, dlq := report.Queues[0], report.Queues[1], report.Queues[2]
	if work.HeadAge == nil || *work.HeadAge != time.Minute || !work.HeadAgeEstimated {
		t.Errorf("quorum work queue: head age %s, estimated %v; want 1m (120 ready / 2 acks a second), estimated", fmtAge(work.HeadAge), work.HeadAgeEstimated)
	}
	if dlq.HeadAge != nil || dlq.HeadAgeEstimated {
		t.Errorf("quorum DLQ with nothing acked: head age %s, estimated %v; want none", fmtAge(dlq.HeadAge), dlq.HeadAgeEstimated)
	}
	if retry.HeadAge != nil || retry.HeadAgeEstimated {
		t.Errorf("classic queue whose head has no timestamp: head age %s, want none", fmtAge(retry.HeadAge))
	}
	if s := report.States(); s.ReadyHeadAge == nil || !s.ReadyHeadAgeEstimated {
		t.Errorf("the states of work lose the estimate: %+v", s)
	}
}

// TestQuorumQueuesReportNoHeadTimestamp: the estimate rests on RabbitMQ
// leaving head_message_timestamp out for a quorum queue, whatever its
// messages carry; a real broker says so.
func TestQuorumQueuesReportNoHeadTimestamp(t *testing.T) {
	t.Parallel()
	conn := amqptest.Dial(t)
	q := amqptest.Name(t, ".quorum")
	amqptest.DeleteOnCleanup(t, []string{q}, nil)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	c, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q, true, false,
		amqp.Publishing{Body: []byte("{}"), Timestamp: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.WaitContext(context.Background()); !ok || err != nil {
		t.Fatalf("not confirmed: %v", err)
	}
	m := broker.NewManagement(broker.ManagementConfig{AMQPURL: amqptest.URL()})
	deadline := time.Now().Add(20 * time.Second)
	for {
		report, err := m.Topology(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(report.Queues) == 1 && report.Queues[0].Ready == 1 {
			if got := report.Queues[0]; got.HeadAge != nil {
				t.Fatalf("a quorum queue reported a head age %s: the estimate's premise no longer holds", fmtAge(got.HeadAge))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the management API never listed %s with its message: %+v", q, report)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
