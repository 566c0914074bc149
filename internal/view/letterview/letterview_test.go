package letterview

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
)

func TestRenderTimes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 20, 0, 0, time.UTC)
	var d deadletter.Detail
	d.DeadLetteredAt, d.IngestedAt = at, at
	d.AttemptHistory = []deadletter.AttemptEvent{
		{At: at, Source: "worker", ErrorClass: "ETIMEDOUT", Error: "connect ETIMEDOUT"},
		{Source: "worker", ErrorClass: "ECONNREFUSED", Error: "no time given"},
	}
	d.Deaths = []deadletter.Death{{Count: 1, Reason: "rejected", Queue: "q"}}
	out := Render(d, Styles{}, Options{Systems: registry.Systems(), Now: at})

	tests := []struct{ name, want string }{
		{"a known time", "  2026-11-30T12:20:00Z  worker  ETIMEDOUT  connect ETIMEDOUT\n"},
		{"an unknown time, aligned with the known ones", "  unknown               worker  ECONNREFUSED  no time given\n"},
		{"an x-death entry without a time", "routing-keys=[] time=unknown\n"},
	}
	for _, tt := range tests {
		if !strings.Contains(out, tt.want) {
			t.Errorf("%s: want %q in\n%s", tt.name, tt.want, out)
		}
	}
	if strings.Contains(out, "0001-01-01") {
		t.Errorf("the zero time is shown:\n%s", out)
	}
}

func TestRenderProperties(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 20, 0, 0, time.UTC)
	millis := at.UnixMilli()
	var d deadletter.Detail
	d.DeadLetteredAt, d.IngestedAt = at, at
	d.Headers = deadletter.EncodeHeaders(map[string]any{"x-retry-count": int8(2), "x-trace": int64(7)})
	d.Properties = &deadletter.Properties{ContentEncoding: "gzip", DeliveryMode: 2, Priority: 5,
		CorrelationID: "corr-\x1b]0;pwned\x07", Timestamp: &millis, UserID: "guest"}
	out := Render(d, Styles{}, Options{Systems: registry.Systems(), Now: at})
	for _, want := range []string{
		"  content_encoding: \"gzip\"\n",
		"  delivery_mode: 2 (persistent)\n",
		"  priority: 5\n",
		`  correlation_id: "corr-\x1b]0;pwned\x07"` + "\n",
		"  timestamp: 1796041200000 (2026-11-30T12:20:00Z, read as milliseconds)\n",
		"  user_id: \"guest\"\n",
		"  x-retry-count: 2 (int8)\n",
		"  x-trace: 7\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("a property drove the terminal:\n%q", out)
	}
	d.Properties = nil
	if out := Render(d, Styles{}, Options{Systems: registry.Systems(), Now: at}); !strings.Contains(out, "(not recorded: captured before expiryctl kept them") {
		t.Errorf("a letter without recorded properties does not say so:\n%s", out)
	}
}

// TestRenderBinaryPayload: a payload that is not text is dumped in hex with
// nothing a terminal would act on, beside the reason it did not read as a
// job, and a quote in a quoted value cannot end the quotes early.
func TestRenderBinaryPayload(t *testing.T) {
	t.Parallel()
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	d := deadletter.Detail{Payload: all, PayloadSize: len(all), PayloadProblem: "body is not JSON: 256 bytes of binary data",
		OriginalExchange: `reserv"ations`, OriginalRoutingKey: "key\x1b[2J"}
	out := Render(d, Styles{}, Options{Systems: registry.Systems(), Now: time.Now()})
	for i, r := range out {
		if r != '\n' && (r < 0x20 || r >= 0x7f && r <= 0x9f || r == utf8.RuneError) {
			t.Fatalf("output holds %U at byte %d", r, i)
		}
	}
	for _, want := range []string{
		"  unreadable body   body is not JSON: 256 bytes of binary data\n",
		"  00000000  00 01 02 03 04 05 06 07  08 09 0a 0b 0c 0d 0e 0f  |................|\n",
		"  000000f0  f0 f1 f2 f3 f4 f5 f6 f7  f8 f9 fa fb fc fd fe ff  |................|\n",
		`exchange "reserv\"ations", routing key "key\x1b[2J"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
}

// TestRenderStoredJob: a job store's letter says it is retried in place,
// lists the job as its store keeps it, and shows each attempt's number and
// trace, escaped line by line, under it.
func TestRenderStoredJob(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 20, 0, 0, time.UTC)
	job := deadletter.StoredJob{System: deadletter.System("river"), Queue: "river://db:5432/jobs/expiry", ID: "42",
		Incarnation: "2026-11-30T12:20:00.123456Z", Kind: "expire_hold", Payload: []byte(`{"reservation_id":"r-1"}`),
		FailedAt: at, Attempts: 2, MaxAttempts: 2,
		Errors: []deadletter.JobError{
			{Attempt: 1, At: at.Add(-time.Minute), Error: "deadlock detected", Trace: "main.expire()\n\tjob.go:12"},
			{Attempt: 2, At: at, Error: "timeout \x1b[31m", Trace: "main.expire()\n\tjob.go:\x1b]0;pwned\x0714"},
		}}
	l := deadletter.Parse(job.Message(), nil, at)
	var d deadletter.Detail
	d.DeadLetteredAt, d.IngestedAt, d.System, d.SourceQueue = l.DeadLetteredAt, at, l.System, l.SourceQueue
	d.AttemptHistory, d.Attempts, d.LastError, d.Native = l.AttemptHistory, l.Attempts, l.LastError, job.Message().Native
	out := Render(d, Styles{}, Options{Systems: registry.Systems(), Now: at})
	for _, want := range []string{
		"replays to",
		"the job itself, retried in place (River job 42)",
		"River job, as its store keeps it",
		"  2026-11-30T12:19:00Z  worker  attempt 1  deadlock detected\n",
		"        \\tjob.go:12\n",
		"kind: expire_hold",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("a trace drove the terminal:\n%q", out)
	}
	if got := QueueLabel(job.Queue, registry.Systems()); got != "River expiry" {
		t.Errorf("QueueLabel = %q", got)
	}
}

// TestRenderQuoting: a header value is quoted once with its inner quotes and
// backslashes escaped once, so what is shown reads back as the value; a
// decimal reads as its decimal value; a JSON payload is shown as the JSON
// that was sent, its backslashes as they are, and only the characters that
// could drive a terminal written as JSON escapes of themselves.
func TestRenderQuoting(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 20, 0, 0, time.UTC)
	var d deadletter.Detail
	d.DeadLetteredAt, d.IngestedAt = at, at
	d.Headers = deadletter.EncodeHeaders(map[string]any{
		"x-last-error": `timeout and "nested \"quotes\""`,
		"x-price":      amqp.Decimal{Scale: 3, Value: 12345},
		"x-refund":     amqp.Decimal{Scale: 4, Value: -5},
		"x-blob":       []byte(`say "hi"`),
	})
	d.Payload = []byte(`{"path":"C:\\temp","msg":"a \"b\"","rtl":"` + "\u202e" + `21","tag":"` + "\U000e0041" + `"}`)
	d.PayloadSize = len(d.Payload)
	out := Render(d, Styles{}, Options{Systems: registry.Systems(), Now: at})
	for _, want := range []string{
		`  x-last-error: "timeout and \"nested \\\"quotes\\\"\""` + "\n",
		"  x-price: 12.345 (decimal)\n",
		"  x-refund: -0.0005 (decimal)\n",
		`  x-blob: bytes "say \"hi\""` + "\n",
		`    "path": "C:\\temp",` + "\n",
		`    "msg": "a \"b\"",` + "\n",
		`    "rtl": "\u202e21",` + "\n",
		`    "tag": "\udb40\udc41"` + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
	// The payload as shown is still the JSON that was sent.
	start := strings.Index(out, "\n  {")
	end := strings.Index(out, "\n  }")
	if start < 0 || end < 0 {
		t.Fatalf("no JSON payload in\n%s", out)
	}
	var sent, shown map[string]any
	if err := json.Unmarshal(d.Payload, &sent); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out[start:end+4]), &shown); err != nil {
		t.Fatalf("the payload shown is not JSON: %v\n%s", err, out[start:end+4])
	}
	if !reflect.DeepEqual(sent, shown) {
		t.Errorf("the payload shown decodes to %v, the one sent to %v", shown, sent)
	}
}

// TestRenderAttemptsFromDeliveryLimit: a quorum queue's delivery-limit
// letter that carries no x-delivery-count (RabbitMQ 3.10 adds none) has
// its attempts counted from x-death, one per death, though each death
// followed x-delivery-limit + 1 deliveries: the view says so, rather than
// show the 1 as if it were the deliveries. With the header, or from SQS,
// whose receive count is the deliveries, it says nothing.
func TestRenderAttemptsFromDeliveryLimit(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 20, 0, 0, time.UTC)
	letter := func(headers map[string]any, system deadletter.System) string {
		var d deadletter.Detail
		d.DeadLetteredAt, d.IngestedAt, d.System, d.Attempts = at, at, system, 1
		d.Deaths = []deadletter.Death{{Count: 1, Reason: "delivery_limit", Queue: "expiry.quorum", Time: at}}
		d.Headers = deadletter.EncodeHeaders(headers)
		return Render(d, Styles{}, Options{Systems: registry.Systems(), Now: at})
	}
	const note = "  attempts          1 (1 delivery_limit death in x-death; RabbitMQ recorded no x-delivery-count, and each such death follows the queue's x-delivery-limit + 1 deliveries)\n"
	if out := letter(map[string]any{}, ""); !strings.Contains(out, note) {
		t.Errorf("want %q in\n%s", note, out)
	}
	for name, out := range map[string]string{
		"with x-delivery-count": letter(map[string]any{"x-delivery-count": int64(1)}, ""),
		"from SQS":              letter(map[string]any{}, deadletter.SQS),
	} {
		if !strings.Contains(out, "  attempts          1\n") {
			t.Errorf("%s: attempts annotated:\n%s", name, out)
		}
	}
}

// TestSystemWithoutRoutes: a letter of a system whose messages go straight
// to a queue (SQS) replays to the queue it came from, or says, in its
// driver's words, what a request must name when it names none; it shows
// the system's own attributes and no broker properties.
func TestSystemWithoutRoutes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	const arn = "arn:aws:sqs:eu-west-1:123456789012:reservation-expiry"
	var d deadletter.Detail
	d.System, d.SourceQueue, d.DeadLetteredAt, d.IngestedAt = deadletter.System("sqs"), arn+"-dlq", at, at
	d.Native = map[string]string{"ApproximateReceiveCount": "3"}
	d.OriginQueue = arn
	out := Render(d, Styles{}, Options{Systems: registry.Systems(), Now: at})
	for _, want := range []string{`replays to        queue "` + arn + `"`, "SQS system attributes", "ApproximateReceiveCount: 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "Properties") || strings.Contains(out, "exchange") {
		t.Errorf("an SQS letter shows a broker's properties or exchange:\n%s", out)
	}
	d.OriginQueue = ""
	if out := Render(d, Styles{}, Options{Systems: registry.Systems(), Now: at}); !strings.Contains(out, "unknown: SQS named no source queue") {
		t.Errorf("a letter that names no origin: want the driver's words in\n%s", out)
	}
	if got := QueueLabel(arn, registry.Systems()); got != "SQS reservation-expiry" {
		t.Errorf("QueueLabel(%s) = %q, want the ARN's last part after the system", arn, got)
	}
}
