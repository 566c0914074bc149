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

	"github.com/expiryctl/expiryctl/internal/fixture/nodetest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/sqstest"
	"github.com/expiryctl/expiryctl/replay"
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

// check fails t unless the server's digest is SQS's or goaws's, and
// reports whether it is goaws's: a client that checks it (the SDK for
// Java) would refuse the message.
func (m sqsAttrMD5) check(t *testing.T, what string) (goaws bool) {
	t.Helper()
	switch m.Server {
	case m.SQS:
		return false
	case m.Goaws:
		return m.Goaws != m.SQS
	}
	t.Errorf("%s: MD5OfMessageAttributes is %q, neither SQS's %s nor goaws's %s", what, m.Server, m.SQS, m.Goaws)
	return false
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
	"redrive-eight":    "broker-limit",
	"redrive-ten":      "broker-limit",
	"worker-etimedout": "transient-exhausted",
}

// sqsNodeHoldUntil is the hold_until of every job the producer sends.
var sqsNodeHoldUntil = time.UnixMilli(1796041200000).UTC()

// TestSQSNodeInterop runs a real Node.js client (@aws-sdk/client-sqs) on
// both ends of an SQS dead-lettering and its governed replay. A Node
// producer sends contract jobs with message attributes of every data type,
// custom types and unicode included, to a work queue whose redrive policy
// moves them to a DLQ after one receive, and one job straight to the DLQ as
// a failing worker does; a Node worker receives the first ones and fails
// them. expiryctl captures the DLQ, and every letter must hold the body
// byte for byte, every attribute with its data type and value, and the
// system attributes the server gave. An operator requests their replay to
// the work queue, an approver approves it and the operator runs it; a Node
// consumer then receives each job as it was sent, body and attributes with
// their types, less the failure's bookkeeping and plus the replay's own as
// far as SQS's ten attributes allow. The job with ten attributes of its own
// has no room for them and is not sent.
func TestSQSNodeInterop(t *testing.T) {
	t.Parallel()
	dir := nodetest.Dir(t, nodePackages...)
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
	// The run watches for its jobs dying again for the canary window after
	// its last send: the test's are received only after the run.
	changes, err := replay.ParsePolicyChanges([]string{"canary_window=300ms"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.SetPolicy(withTimeout(t), db.Pool, "admin", changes); err != nil {
		t.Fatal(err)
	}
	ingester := withAWS(newCLI(db.Login(t, "ingester", "expiryctl_ingester").URL, ""))
	aliceLogin := db.Login(t, "alice", "expiryctl_operator")
	bobLogin := db.Login(t, "bob", "expiryctl_approver")
	alice, bob := withAWS(newCLI(aliceLogin.URL, "")), withAWS(newCLI(bobLogin.URL, ""))

	cfgPath := writeJSONFile(t, filepath.Join(tmp, "config.json"), cfg)
	started := time.Now()
	var out string
	out, err = runNode(t, dir, "sqs_producer.js", cfgPath)
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
	// a second has run out, goaws's redrive moves them to the DLQ on its
	// one-second timer (SQS would on the next receive).
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
	letters := map[string]int64{}
	var ids []string
	// messages counts those sent and received, goawsMD5 those whose
	// MD5OfMessageAttributes is goaws's, not SQS's.
	messages, goawsMD5 := n, 0
	for _, c := range record.Cases {
		id, ok := byMessageID[c.MessageID]
		if !ok {
			t.Errorf("%s (message id %s) was not captured", c.Name, c.MessageID)
			continue
		}
		letters[c.Name] = id
		ids = append(ids, "--id", strconv.FormatInt(id, 10))
		var shown sqsShownLetter
		decodeJSON(t, alice.ok(t, "dlq", "show", strconv.FormatInt(id, 10), "-o", "json"), &shown)
		for _, d := range compareCaptured(t, c, shown, cfg, started) {
			t.Errorf("%s (letter %d): %s", c.Name, id, d)
		}
		if c.MD5.check(t, c.Name+" as sent") {
			goawsMD5++
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The governed replay, as people: alice requests, bob approves, alice
	// runs. The redriven letters name no origin on goaws, which gives no
	// DeadLetterQueueSourceArn and has no ListDeadLetterSourceQueues, so
	// the request names the work queue; the worker's letter names it in
	// x-original-queue. No canary: its window would only wait.
	var req struct {
		ID    int64 `json:"id"`
		Items int   `json:"items"`
	}
	decodeJSON(t, alice.ok(t, append(append([]string{"replay", "request"}, ids...),
		"--routing-key", work.ARN, "--same-handler-ok", "SQS shows no consumers",
		"--why", "INC-3304: the reservations database timed out", "--canary", "0", "-o", "json")...), &req)
	if req.Items != n {
		t.Fatalf("replay request %d holds %d letters, want %d", req.ID, req.Items, n)
	}
	id := strconv.FormatInt(req.ID, 10)
	bob.ok(t, "replay", "approve", id, "--why", "checked the cohort")

	runStarted := time.Now()
	var summary replaySummary
	decodeJSON(t, alice.ok(t, "replay", "run", id, "-o", "json"), &summary)
	runFinished := time.Now()
	// The letter with ten attributes of its own has no room for the
	// replay's: it is not sent, and its item says why.
	if summary.Status != "completed" || summary.Confirmed != n-1 || summary.Published != n-1 || summary.Skipped+summary.Failed != 1 {
		t.Errorf("replay run %d: %+v, want completed with %d confirmed and the ten-attribute letter not sent", req.ID, summary, n-1)
	}
	var state, why string
	if err := db.Pool.QueryRow(withTimeout(t), `SELECT state, coalesce(last_error, '') FROM expiryctl.replay_items
		WHERE request_id = $1 AND dead_letter_id = $2`, req.ID, letters["redrive-ten"]).Scan(&state, &why); err != nil {
		t.Fatal(err)
	}
	t.Logf("the ten-attribute letter's item: %s: %s", state, why)
	if (state != "skipped" && state != "failed") || !strings.Contains(why, "SQS takes 10 message attributes") {
		t.Errorf("the ten-attribute letter's item is %s (%q), want it skipped or failed for SQS's limit of ten attributes", state, why)
	}

	// The Node consumer receives what the run sent. A job is known by its
	// body (a replay is a new message with an id of its own), so a body
	// changed by a byte would arrive as one the producer never sent.
	out, err = runNode(t, dir, "sqs_consumer.js", cfgPath, "drain", strconv.Itoa(n-1))
	if err != nil {
		t.Fatalf("the Node consumer failed (%v):\n%s", err, out)
	}
	received := parseReceived(t, out)
	exp := sqsReplayExpect{request: req.ID, replayedBy: aliceLogin.Name, approvedBy: bobLogin.Name, from: runStarted, to: runFinished}
	for _, c := range record.Cases {
		copies := received[string(c.Body)]
		delete(received, string(c.Body))
		if c.Name == "redrive-ten" {
			if len(copies) != 0 {
				t.Errorf("%s: the Node consumer received %d copies, want none: %+v", c.Name, len(copies), copies)
			}
			continue
		}
		if len(copies) != 1 {
			t.Errorf("%s: the Node consumer received %d copies, want 1", c.Name, len(copies))
		}
		for _, m := range copies {
			t.Logf("%s replayed with %d attributes: %s", c.Name, len(m.Attributes), attributeTypes(m.Attributes))
			for _, d := range exp.diff(c, letters[c.Name], m.Attributes) {
				t.Errorf("%s as replayed: %s", c.Name, d)
			}
			if len(m.Attributes) > sqsMaxAttributes {
				t.Errorf("%s as replayed: %d attributes; SQS refuses a message with more than %d (goaws does not)", c.Name, len(m.Attributes), sqsMaxAttributes)
			}
			if m.MD5.check(t, c.Name+" as replayed") {
				goawsMD5++
			}
			messages++
		}
	}
	if goawsMD5 > 0 {
		t.Logf("%d of %d messages had goaws's MD5OfMessageAttributes, not SQS's: goaws hashes no value of a Number or custom type", goawsMD5, messages)
	}
	for body, copies := range received {
		t.Errorf("the Node consumer received %d messages the producer never sent: %q", len(copies), body)
	}
	for _, q := range []sqstest.Queue{work, dlq} {
		if visible, inFlight := sqstest.Approximate(t, client, q.URL); visible != 0 || inFlight != 0 {
			t.Errorf("%s holds %d messages (%d in flight) after the consumer, want none", q.Name, visible, inFlight)
		}
	}
}

// sqsMaxAttributes is how many message attributes SQS takes on a message.
const sqsMaxAttributes = 10

// sqsReceived is one message the Node consumer received (a JSON line of
// sqs_consumer.js drain).
type sqsReceived struct {
	MessageID  string                `json:"message_id"`
	Body       []byte                `json:"body"`
	Attributes map[string]sqsAttrVal `json:"attributes"`
	MD5        sqsAttrMD5            `json:"md5_of_message_attributes"`
}

// parseReceived reads the consumer's JSON lines, by body.
func parseReceived(t *testing.T, out string) map[string][]sqsReceived {
	t.Helper()
	byBody := map[string][]sqsReceived{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m sqsReceived
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("the Node consumer printed %q, not a message (%v):\n%s", line, err, out)
		}
		byBody[string(m.Body)] = append(byBody[string(m.Body)], m)
	}
	return byBody
}

// sqsReplayExpect is what the replay run was: its request, who ran and
// approved it, and when.
type sqsReplayExpect struct {
	request                int64
	replayedBy, approvedBy string
	from, to               time.Time
}

// sqsStripped are the attributes a replay leaves out: the failure's
// bookkeeping (docs/message-contract.md).
var sqsStripped = map[string]bool{"x-error-class": true, "x-last-error": true, "x-attempt-history": true,
	"x-attempt": true, "x-retry-count": true, "x-retries": true, "retry-count": true}

// diff lists how the attributes of c's replay differ from what it must
// carry (docs/sqs.md): those sent, less the failure's bookkeeping, plus
// x-replay-request and x-replay-count, then x-replay-item, x-replayed-by,
// x-approved-by and x-replayed-at (RFC 3339, within the run) while SQS's
// ten leave room.
func (e sqsReplayExpect) diff(c sqsNodeCase, letter int64, got map[string]sqsAttrVal) []string {
	want := map[string]sqsAttrVal{}
	for name, a := range c.Attributes {
		if !sqsStripped[name] {
			want[name] = a
		}
	}
	text := func(typ, s string) sqsAttrVal { return sqsAttrVal{Type: typ, String: &s} }
	replayedAt := text("String", fmt.Sprintf("an RFC 3339 time from %s to %s", e.from.UTC().Truncate(time.Second).Format(time.RFC3339), e.to.UTC().Format(time.RFC3339)))
	if g, ok := got["x-replayed-at"]; ok && g.Type == "String" && g.String != nil {
		if at, err := time.Parse(time.RFC3339, *g.String); err == nil && !at.Before(e.from.Truncate(time.Second)) && !at.After(e.to) {
			replayedAt = g
		}
	}
	for _, a := range []struct {
		name  string
		value sqsAttrVal
	}{
		{"x-replay-request", text("Number", strconv.FormatInt(e.request, 10))},
		{"x-replay-count", text("Number", "1")},
		{"x-replay-item", text("Number", strconv.FormatInt(letter, 10))},
		{"x-replayed-by", text("String", e.replayedBy)},
		{"x-approved-by", text("String", e.approvedBy)},
		{"x-replayed-at", replayedAt},
	} {
		if len(want) < sqsMaxAttributes {
			want[a.name] = a.value
		}
	}
	return diffAttributes(want, got)
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

// attributeTypes lists attrs as "name:type", in name order.
func attributeTypes(attrs map[string]sqsAttrVal) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString(name + ":" + attrs[name].Type)
	}
	return b.String()
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
