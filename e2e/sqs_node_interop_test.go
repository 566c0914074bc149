package e2e_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/sqstest"
)

// sqsNodeConfig is what e2e/node/sqs_producer.js and sqs_consumer.js read
// (see e2e/node/sqs.js): the SQS server and the test's own queues.
type sqsNodeConfig struct {
	Endpoint  string       `json:"endpoint"`
	Region    string       `json:"region"`
	WorkQueue sqsNodeQueue `json:"work_queue"`
	DLQ       sqsNodeQueue `json:"dlq"`
	// Record is where the producer writes what it sent.
	Record string `json:"record"`
}

type sqsNodeQueue struct {
	URL  string `json:"url"`
	ARN  string `json:"arn"`
	Name string `json:"name"`
}

// sqsNodeRecord is the producer's record of what it sent.
type sqsNodeRecord struct {
	Cases []sqsNodeCase `json:"cases"`
}

type sqsNodeCase struct {
	Name string `json:"name"`
	// Path is how the job reached the DLQ: "redrive" (the work queue's
	// redrive policy moved it) or "worker" (the worker sent it there).
	Path       string                `json:"path"`
	MessageID  string                `json:"message_id"`
	Body       []byte                `json:"body"`
	Attributes map[string]sqsAttrVal `json:"attributes"`
	MD5        sqsAttrMD5            `json:"md5_of_message_attributes"`
}

// sqsAttrMD5 is a message's MD5OfMessageAttributes as the server answered
// it, and as SQS and goaws v0.5.4 compute it.
type sqsAttrMD5 struct {
	Server string `json:"server"`
	SQS    string `json:"sqs"`
	Goaws  string `json:"goaws"`
}

// check fails t unless the server's digest is SQS's or goaws's, and says
// when it is goaws's: a client that checks it (the SDK for Java) would
// refuse the message.
func (m sqsAttrMD5) check(t *testing.T, what string) {
	t.Helper()
	switch m.Server {
	case m.SQS:
	case m.Goaws:
		t.Logf("%s: MD5OfMessageAttributes is goaws's %s, not SQS's %s: goaws hashes no value of a Number or custom type", what, m.Server, m.SQS)
	default:
		t.Errorf("%s: MD5OfMessageAttributes is %q, neither SQS's %s nor goaws's %s", what, m.Server, m.SQS, m.Goaws)
	}
}

// sqsAttrVal is one message attribute as the Node scripts write it: its
// data type, and its value as text (String and Number types) or bytes
// (Binary types), never both.
type sqsAttrVal struct {
	Type   string  `json:"type"`
	String *string `json:"string,omitempty"`
	Bytes  []byte  `json:"bytes,omitempty"`
}

func (a sqsAttrVal) show() string {
	if a.String != nil {
		return fmt.Sprintf("%s %q", a.Type, *a.String)
	}
	return fmt.Sprintf("%s 0x%x", a.Type, a.Bytes)
}

func (a sqsAttrVal) equal(b sqsAttrVal) bool {
	return a.Type == b.Type && (a.String == nil) == (b.String == nil) &&
		(a.String == nil || *a.String == *b.String) && bytes.Equal(a.Bytes, b.Bytes)
}

// sqsShownLetter is the part of `dlq show -o json` the test compares.
type sqsShownLetter struct {
	ID              int64             `json:"id"`
	MessageID       string            `json:"message_id"`
	ReservationID   string            `json:"reservation_id"`
	IdempotencyKey  string            `json:"idempotency_key"`
	ExpectedVersion *int64            `json:"expected_version"`
	DueAt           *time.Time        `json:"due_at"`
	Category        string            `json:"reason_category"`
	ErrorClass      string            `json:"error_class"`
	Attempts        int               `json:"attempts"`
	SourceQueue     string            `json:"source_queue"`
	OriginQueue     string            `json:"origin_queue"`
	System          string            `json:"system"`
	Native          map[string]string `json:"native"`
	Headers         json.RawMessage   `json:"headers"`
	Payload         []byte            `json:"payload"`
}

// sqsNodeCategories are the categories capture must give each case: SQS's
// redrive says only that the receive limit was reached; the worker names
// a transient Node.js error.
var sqsNodeCategories = map[string]string{
	"redrive-snake":    "broker-limit",
	"redrive-camel":    "broker-limit",
	"redrive-ten":      "broker-limit",
	"worker-etimedout": "transient-exhausted",
}

// sqsNodeHoldUntil is the hold_until of every job the producer sends.
var sqsNodeHoldUntil = time.UnixMilli(1796041200000).UTC()

// TestSQSNodeInterop runs a real Node.js client (@aws-sdk/client-sqs) on
// both ends of an SQS dead-lettering. A Node producer sends contract jobs
// with message attributes of every data type, custom types and unicode
// included, to a work queue whose redrive policy moves them to a DLQ after
// one receive, and one job straight to the DLQ as a failing worker does; a
// Node worker receives the first ones and fails them. expiryctl captures the
// DLQ, and every letter must hold the body byte for byte, every attribute
// with its data type and value, and the system attributes the server gave.
func TestSQSNodeInterop(t *testing.T) {
	t.Parallel()
	dir := nodeHarness(t)
	tmp := t.TempDir()

	client := sqstest.Client(t)
	work, dlq := sqstest.CreateWithDLQ(t, client, 1, 1)
	cfg := sqsNodeConfig{
		Endpoint:  sqstest.Endpoint(),
		Region:    sqstest.Region,
		WorkQueue: sqsNodeQueue{URL: work.URL, ARN: work.ARN, Name: work.Name},
		DLQ:       sqsNodeQueue{URL: dlq.URL, ARN: dlq.ARN, Name: dlq.Name},
		Record:    filepath.Join(tmp, "record.json"),
	}
	db := pgtest.New(t)
	ingester := withAWS(newCLI(db.Login(t, "ingester", "expiryctl_ingester").URL, ""))
	alice := withAWS(newCLI(db.Login(t, "alice", "expiryctl_operator").URL, ""))

	cfgPath := writeJSONFile(t, filepath.Join(tmp, "config.json"), cfg)
	started := time.Now()
	out, err := runNode(t, dir, "sqs_producer.js", cfgPath)
	if err != nil {
		t.Fatalf("the Node producer failed (%v):\n%s", err, out)
	}
	t.Logf("the Node producer sent:\n%s", out)
	var record sqsNodeRecord
	readJSONFile(t, cfg.Record, &record)
	n := len(record.Cases)
	if n != len(sqsNodeCategories) {
		t.Fatalf("the producer recorded %d cases, the test knows %d", n, len(sqsNodeCategories))
	}

	// The worker fails the redriven jobs; once their visibility timeout of
	// a second has run out, the redrive moves them to the DLQ.
	out, err = runNode(t, dir, "sqs_consumer.js", cfgPath, "fail")
	if err != nil {
		t.Fatalf("the failing Node worker failed (%v):\n%s", err, out)
	}
	t.Logf("the failing Node worker:\n%s", out)
	waitFor(t, 15*time.Second, fmt.Sprintf("the %d jobs in %s", n, dlq.Name), func() bool {
		visible, inFlight := sqstest.Approximate(t, client, dlq.URL)
		return visible == n && inFlight == 0
	})
	if visible, _ := sqstest.Approximate(t, client, work.URL); visible != 0 {
		t.Fatalf("%s still holds %d messages after the redrive, want 0", work.Name, visible)
	}

	// Capture, by the DLQ's URL on the test's server.
	dlqURL := strings.TrimSuffix(sqstest.Endpoint(), "/") + "/" + arnAccount(t, dlq.ARN) + "/" + dlq.Name
	res := ingester.ok(t, "dlq", "ingest", "--queue", dlqURL)
	if want := fmt.Sprintf("ingested %d letters", n); !strings.Contains(res.stderr, want) {
		t.Errorf("ingest should say %q: %s", want, res)
	}
	if visible, inFlight := sqstest.Approximate(t, client, dlq.URL); visible != 0 || inFlight != 0 {
		t.Errorf("%s holds %d messages (%d in flight) after ingest, want none", dlq.Name, visible, inFlight)
	}

	var listed []listedLetter
	decodeJSON(t, alice.ok(t, "dlq", "list", "-o", "json", "--limit", "0"), &listed)
	if len(listed) != n {
		t.Fatalf("%d letters archived for %d jobs", len(listed), n)
	}
	byMessageID := map[string]int64{}
	for _, l := range listed {
		byMessageID[l.MessageID] = l.ID
	}
	for _, c := range record.Cases {
		id, ok := byMessageID[c.MessageID]
		if !ok {
			t.Errorf("%s (message id %s) was not captured", c.Name, c.MessageID)
			continue
		}
		var shown sqsShownLetter
		decodeJSON(t, alice.ok(t, "dlq", "show", strconv.FormatInt(id, 10), "-o", "json"), &shown)
		for _, d := range compareCaptured(t, c, shown, cfg, started) {
			t.Errorf("%s (letter %d): %s", c.Name, id, d)
		}
		c.MD5.check(t, c.Name+" as sent")
	}
}

// compareCaptured returns how the letter expiryctl shows differs from the
// job the producer sent.
func compareCaptured(t *testing.T, c sqsNodeCase, got sqsShownLetter, cfg sqsNodeConfig, started time.Time) []string {
	t.Helper()
	var diffs []string
	if !bytes.Equal(got.Payload, c.Body) {
		diffs = append(diffs, fmt.Sprintf("payload is %q, want the %d bytes sent: %q", got.Payload, len(c.Body), c.Body))
	}
	attrs, err := storedSQSAttributes(got.Headers)
	if err != nil {
		diffs = append(diffs, fmt.Sprintf("headers %s: %v", got.Headers, err))
	}
	diffs = append(diffs, diffAttributes(c.Attributes, attrs)...)

	if got.System != "sqs" {
		diffs = append(diffs, fmt.Sprintf("system %q, want sqs", got.System))
	}
	if got.SourceQueue != cfg.DLQ.ARN {
		diffs = append(diffs, fmt.Sprintf("source_queue %q, want the DLQ's ARN %s", got.SourceQueue, cfg.DLQ.ARN))
	}
	if want := sqsNodeCategories[c.Name]; got.Category != want {
		diffs = append(diffs, fmt.Sprintf("category %s, want %s", got.Category, want))
	}
	switch c.Path {
	case "worker":
		// The worker names its origin and its error.
		if got.OriginQueue != cfg.WorkQueue.ARN {
			diffs = append(diffs, fmt.Sprintf("origin_queue %q, want x-original-queue's %s", got.OriginQueue, cfg.WorkQueue.ARN))
		}
		if got.ErrorClass != "ETIMEDOUT" || got.Attempts != 3 {
			diffs = append(diffs, fmt.Sprintf("error class %q after %d attempts, want ETIMEDOUT after 3 (x-attempt-history)", got.ErrorClass, got.Attempts))
		}
	case "redrive":
		// SQS names the origin in DeadLetterQueueSourceArn, and
		// ListDeadLetterSourceQueues finds the one queue redriving to the
		// DLQ; goaws has neither, so its letters name none.
		if got.OriginQueue != "" && got.OriginQueue != cfg.WorkQueue.ARN {
			diffs = append(diffs, fmt.Sprintf("origin_queue %q, want the work queue %s or none", got.OriginQueue, cfg.WorkQueue.ARN))
		}
		if got.Attempts < 1 {
			diffs = append(diffs, fmt.Sprintf("%d attempts, want at least the one receive", got.Attempts))
		}
	}

	// The contract's fields, from a snake_case or a camelCase body.
	var job struct {
		Reservation      string `json:"reservation_id"`
		ReservationCamel string `json:"reservationId"`
		Key              string `json:"idempotency_key"`
		KeyCamel         string `json:"idempotencyKey"`
	}
	if err := json.Unmarshal(c.Body, &job); err != nil {
		t.Fatalf("%s: the producer sent a body that is not JSON: %v", c.Name, err)
	}
	wantReservation, wantKey := job.Reservation+job.ReservationCamel, job.Key+job.KeyCamel
	if got.ReservationID != wantReservation || got.IdempotencyKey != wantKey {
		diffs = append(diffs, fmt.Sprintf("reservation %q with idempotency key %q, want %q with %q", got.ReservationID, got.IdempotencyKey, wantReservation, wantKey))
	}
	if got.ExpectedVersion == nil || *got.ExpectedVersion != 1 {
		diffs = append(diffs, fmt.Sprintf("expected_version %v, want 1", got.ExpectedVersion))
	}
	if got.DueAt == nil || !got.DueAt.Equal(sqsNodeHoldUntil) {
		diffs = append(diffs, fmt.Sprintf("due_at %v, want hold_until %s", got.DueAt, sqsNodeHoldUntil))
	}

	// The system attributes every SQS server gives, and goaws too.
	native := got.Native
	if native["MessageId"] != c.MessageID || got.MessageID != c.MessageID {
		diffs = append(diffs, fmt.Sprintf("message id %q (native %q), want the one SendMessage answered, %s", got.MessageID, native["MessageId"], c.MessageID))
	}
	if r, err := strconv.Atoi(native["ApproximateReceiveCount"]); err != nil || r < 1 {
		diffs = append(diffs, fmt.Sprintf("native ApproximateReceiveCount %q, want a count of at least 1", native["ApproximateReceiveCount"]))
	}
	// goaws gives the receive time as SentTimestamp, SQS the send time:
	// both fall within the test.
	if ms, err := strconv.ParseInt(native["SentTimestamp"], 10, 64); err != nil ||
		ms < started.Add(-time.Second).UnixMilli() || ms > time.Now().Add(time.Second).UnixMilli() {
		diffs = append(diffs, fmt.Sprintf("native SentTimestamp %q, want milliseconds within the test", native["SentTimestamp"]))
	}
	t.Logf("%s: native attributes %v", c.Name, native)
	return diffs
}

// storedSQSAttributes reads a letter's headers as the archive documents
// them for SQS (docs/sqs.md): a plain string is a String attribute, and
// every other attribute is {"$sqs":{"type":T,"string"|"bytes":V}}. It does
// not use deadletter's decoder: the test holds the documented form, not
// the code's round trip.
func storedSQSAttributes(raw json.RawMessage) (map[string]sqsAttrVal, error) {
	var headers map[string]json.RawMessage
	if err := json.Unmarshal(raw, &headers); err != nil {
		return nil, err
	}
	attrs := make(map[string]sqsAttrVal, len(headers))
	for name, v := range headers {
		var s string
		if json.Unmarshal(v, &s) == nil {
			attrs[name] = sqsAttrVal{Type: "String", String: &s}
			continue
		}
		var tagged struct {
			SQS *struct {
				Type   string  `json:"type"`
				String *string `json:"string"`
				Bytes  *string `json:"bytes"`
			} `json:"$sqs"`
		}
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&tagged); err != nil {
			return nil, fmt.Errorf("%s is %s: %w", name, v, err)
		}
		if tagged.SQS == nil || (tagged.SQS.String == nil) == (tagged.SQS.Bytes == nil) {
			return nil, fmt.Errorf(`%s is %s, not a string or {"$sqs":{"type","string"|"bytes"}}`, name, v)
		}
		a := sqsAttrVal{Type: tagged.SQS.Type, String: tagged.SQS.String}
		if tagged.SQS.Bytes != nil {
			b, err := base64.StdEncoding.DecodeString(*tagged.SQS.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: bytes: %w", name, err)
			}
			a.Bytes = b
		}
		attrs[name] = a
	}
	return attrs, nil
}

// diffAttributes lists how got differs from want, attribute by attribute,
// data type included.
func diffAttributes(want, got map[string]sqsAttrVal) []string {
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("attribute %s: missing, want %s", name, want[name].show()))
		case !g.equal(want[name]):
			diffs = append(diffs, fmt.Sprintf("attribute %s: %s, want %s", name, g.show(), want[name].show()))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("attribute %s: %s, not sent", name, got[name].show()))
		}
	}
	return diffs
}

// arnAccount is the account an SQS queue ARN names
// (arn:aws:sqs:REGION:ACCOUNT:NAME).
func arnAccount(t *testing.T, arn string) string {
	t.Helper()
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[2] != "sqs" {
		t.Fatalf("%q is not an SQS queue ARN", arn)
	}
	return parts[4]
}

// withAWS is c with the AWS configuration the test's SQS server takes:
// static credentials (any do), its region, its endpoint, and no instance
// metadata to wait for. A developer's own AWS_* settings are left out, so
// that no test reaches a real account.
func withAWS(c *cli) *cli {
	env := make([]string, 0, len(c.env)+5)
	for _, kv := range c.env {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"AWS_ACCESS_KEY_ID=expiryctl-e2e",
		"AWS_SECRET_ACCESS_KEY=expiryctl-e2e",
		"AWS_REGION="+sqstest.Region,
		"AWS_ENDPOINT_URL_SQS="+sqstest.Endpoint(),
		"AWS_EC2_METADATA_DISABLED=true",
	)
	return &cli{env: env}
}
