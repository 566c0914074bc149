package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/nodetest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// nodeTimeout bounds one run of a Node script; each takes about a second.
const nodeTimeout = 30 * time.Second

// nodeConfig is what e2e/node/producer.js and consumer.js read: the broker,
// and the test's own queue and exchange names.
type nodeConfig struct {
	URL  string `json:"url"`
	User string `json:"user"`
	// Foreign is a second RabbitMQ user the producer publishes one letter
	// as, so that its user_id is not the replaying connection's; nil when
	// the test could not create one.
	Foreign    *nodeUser `json:"foreign"`
	DLQ        string    `json:"dlq"`
	Exchange   string    `json:"exchange"`
	RoutingKey string    `json:"routing_key"`
	// WorkQueue is bound to Exchange with RoutingKey: where the worker's
	// letters, which name that origin, are replayed to.
	WorkQueue string `json:"work_queue"`
	// BrokerQueues are the queues RabbitMQ dead-letters from, by case name;
	// replay sends each letter back to the queue its x-death names.
	BrokerQueues map[string]string `json:"broker_queues"`
	// Record is where the producer writes what it sent.
	Record string `json:"record"`
}

type nodeUser struct {
	URL  string `json:"url"`
	User string `json:"user"`
}

// nodeExpect is what the consumer needs from the Go side to check the
// replayed messages: who replayed and approved them, when, and which letter
// each case became.
type nodeExpect struct {
	RequestID     int64                 `json:"request_id"`
	ReplayedBy    string                `json:"replayed_by"`
	ApprovedBy    string                `json:"approved_by"`
	ReplayingUser string                `json:"replaying_user"`
	RunStartedMS  int64                 `json:"run_started_ms"`
	RunFinishedMS int64                 `json:"run_finished_ms"`
	Letters       map[string]nodeLetter `json:"letters"`
}

type nodeLetter struct {
	ID       int64  `json:"id"`
	Category string `json:"category"`
}

// nodeRecord is the part of the producer's record the Go side reads.
type nodeRecord struct {
	Cases []struct {
		Name string `json:"name"`
		Sent struct {
			Properties struct {
				MessageID string `json:"message_id"`
			} `json:"properties"`
		} `json:"sent"`
	} `json:"cases"`
}

// nodeCategories are the categories capture must give the cases whose
// classification the message contract fixes.
var nodeCategories = map[string]string{
	"worker-etimedout":      "transient-exhausted",
	"worker-econnrefused":   "transient-exhausted",
	"foreign-user":          "transient-exhausted",
	"broker-reject":         "unknown",
	"broker-ttl-message":    "broker-expired",
	"broker-ttl-queue":      "broker-expired",
	"broker-maxlen":         "broker-limit",
	"broker-delivery-limit": "broker-limit",
}

// TestNodeInterop runs a real Node.js client (amqplib) on both ends of a
// governed replay. A Node producer dead-letters jobs of every shape (a
// worker's copies with Node's failure headers, a gzip body, RabbitMQ's
// reject, TTL, max-length and quorum delivery-limit dead-lettering, a letter
// from another RabbitMQ user) with every basic property and every AMQP
// header type; expiryctl captures them, an operator requests their replay,
// an approver approves it and the operator runs it; a Node consumer then
// checks, from the raw bytes, that each replayed message is what was sent,
// property by property and header by header, wire type included.
func TestNodeInterop(t *testing.T) {
	t.Parallel()
	dir := nodetest.Dir(t, nodePackages...)
	tmp := t.TempDir()

	if out, err := runNode(t, dir, "wire_selftest.js"); err != nil {
		t.Fatalf("the test's own typed AMQP decoder disagrees with amqplib's encoder (%v):\n%s", err, out)
	}

	broker := amqptest.URL()
	bu, err := url.Parse(broker)
	if err != nil {
		t.Fatalf("EXPIRYCTL_TEST_AMQP_URL: %v", err)
	}
	user := bu.User.Username()
	if user == "" {
		user = "guest"
	}
	prefix := amqptest.Name(t, "")
	cfg := nodeConfig{
		URL: broker, User: user,
		DLQ: prefix + ".dlq", Exchange: prefix + ".reservations", RoutingKey: "reservation.expire", WorkQueue: prefix + ".work",
		BrokerQueues: map[string]string{
			"broker-reject":         prefix + ".reject",
			"broker-ttl-message":    prefix + ".ttl-message",
			"broker-ttl-queue":      prefix + ".ttl-queue",
			"broker-maxlen":         prefix + ".maxlen",
			"broker-delivery-limit": prefix + ".delivery-limit",
		},
		Record: filepath.Join(tmp, "record.json"),
	}
	queues := []string{cfg.DLQ, cfg.WorkQueue}
	for _, q := range cfg.BrokerQueues {
		queues = append(queues, q)
	}
	amqptest.DeleteOnCleanup(t, queues, []string{cfg.Exchange})

	// The second RabbitMQ user (rabbitmqctl takes a second or so a call)
	// and the database are made at the same time.
	foreign := foreignRabbitUser(t, bu)
	db := pgtest.New(t)
	ingester := newCLI(db.Login(t, "ingester", "expiryctl_ingester").URL, "")
	operatorLogin := db.Login(t, "operator", "expiryctl_operator")
	approverLogin := db.Login(t, "approver", "expiryctl_approver")
	operator, approver := newCLI(operatorLogin.URL, ""), newCLI(approverLogin.URL, "")
	cfg.Foreign = foreign()

	cfgPath := writeJSONFile(t, filepath.Join(tmp, "config.json"), cfg)
	out, err := runNode(t, dir, "producer.js", cfgPath)
	if err != nil {
		t.Fatalf("the Node producer failed (%v):\n%s", err, out)
	}
	t.Logf("the Node producer dead-lettered:\n%s", out)
	var record nodeRecord
	readJSONFile(t, cfg.Record, &record)
	n := len(record.Cases)

	// Capture.
	res := ingester.ok(t, "dlq", "ingest", "--queue", cfg.DLQ)
	if want := fmt.Sprintf("ingested %d letters from %s: %d stored", n, cfg.DLQ, n); !strings.Contains(res.stderr, want) {
		t.Errorf("ingest should say %q: %s", want, res)
	}
	r := newRabbit(t)
	if left := r.settled(t, cfg.DLQ); left != 0 {
		t.Errorf("%d letters left in %s after ingest, want 0", left, cfg.DLQ)
	}
	var listed []listedLetter
	decodeJSON(t, operator.ok(t, "dlq", "list", "-o", "json", "--limit", "0"), &listed)
	byMessageID := map[string]listedLetter{}
	for _, l := range listed {
		byMessageID[l.MessageID] = l
	}
	exp := nodeExpect{ReplayedBy: operatorLogin.Name, ApprovedBy: approverLogin.Name, ReplayingUser: user, Letters: map[string]nodeLetter{}}
	var ids []string
	for _, c := range record.Cases {
		l, ok := byMessageID[c.Sent.Properties.MessageID]
		if !ok {
			t.Errorf("%s (message_id %s) was not captured", c.Name, c.Sent.Properties.MessageID)
			continue
		}
		exp.Letters[c.Name] = nodeLetter{ID: l.ID, Category: l.Category}
		ids = append(ids, "--id", strconv.FormatInt(l.ID, 10))
		if want, ok := nodeCategories[c.Name]; ok && l.Category != want {
			t.Errorf("%s was captured as %s, want %s", c.Name, l.Category, want)
		}
	}
	if len(listed) != n || len(ids) != 2*n {
		t.Fatalf("%d letters archived for %d cases, %d of them found by message id", len(listed), n, len(ids)/2)
	}

	// The governed replay, as people: the operator requests, the approver
	// approves, the operator runs. No canary: its window would only wait.
	var req struct {
		ID    int64 `json:"id"`
		Items int   `json:"items"`
	}
	decodeJSON(t, operator.ok(t, append(append([]string{"replay", "request"}, ids...),
		"--canary", "0", "--why", "issue 18: Node.js interop", "-o", "json",
		// The Node consumer reads the work queues after the run, and the
		// cases include letters that cannot succeed: the wire is the subject.
		"--same-handler-ok", "the Node consumer reads the replays after the run", "--include-permanent",
		// Through the original exchange, as the Node producer published
		// them: the worker's letters name no queue they failed in, and
		// this DLQ is not named after its work queue.
		"--via-exchange")...), &req)
	if req.Items != n {
		t.Fatalf("replay request %d holds %d letters, want %d", req.ID, req.Items, n)
	}
	exp.RequestID = req.ID
	id := strconv.FormatInt(req.ID, 10)
	approver.ok(t, "replay", "approve", id, "--why", "checked the cohort")

	// The handler is fixed: the work queues come back plain, with no TTL,
	// limit or dead-letter exchange, so that the replays stay in them.
	redeclarePlain(t, r, cfg.BrokerQueues)
	if ready, _ := r.inspect(t, cfg.WorkQueue); ready != 0 {
		t.Fatalf("%s holds %d messages before the replay, want 0", cfg.WorkQueue, ready)
	}

	exp.RunStartedMS = time.Now().UnixMilli()
	var summary replaySummary
	decodeJSON(t, operator.ok(t, "replay", "run", id, "-o", "json"), &summary)
	exp.RunFinishedMS = time.Now().UnixMilli()
	if summary.Status != "completed" || summary.Confirmed != n || summary.Failed != 0 {
		t.Fatalf("replay run %d: %+v, want completed with %d confirmed", req.ID, summary, n)
	}

	// What the Node consumer receives.
	expPath := writeJSONFile(t, filepath.Join(tmp, "expect.json"), exp)
	out, err = runNode(t, dir, "consumer.js", cfgPath, expPath)
	if err != nil {
		t.Errorf("the Node consumer received something other than what the producer sent (%v):\n%s", err, out)
	} else {
		t.Logf("the Node consumer received:\n%s", out)
	}
}

// nodePackages are the packages the Node scripts of these tests load.
var nodePackages = []string{"amqplib", "@aws-sdk/client-sqs"}

// runNode runs a script of e2e/node and returns what it printed.
func runNode(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("still running after %s, killed", nodeTimeout)
	}
	return out.String(), err
}

// rabbitUser is a RabbitMQ user a test made for itself.
type rabbitUser struct {
	name, password string
	err            error
}

// addRabbitUser creates a RabbitMQ user allowed everything on vhost "/".
// rabbitmqctl needs root on the machine that runs the broker.
func addRabbitUser() rabbitUser {
	b := make([]byte, 19)
	_, _ = rand.Read(b)
	u := rabbitUser{name: "expiryctl-node-" + hex.EncodeToString(b[:3]), password: hex.EncodeToString(b[3:])}
	// The password goes on stdin, not the command line.
	if u.err = rabbitmqctl(u.password+"\n", "add_user", u.name); u.err != nil {
		return u
	}
	if u.err = rabbitmqctl("", "set_permissions", "-p", "/", u.name, ".*", ".*", ".*"); u.err != nil {
		_ = rabbitmqctl("", "delete_user", u.name)
	}
	return u
}

func rabbitmqctl(stdin string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "rabbitmqctl", args...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("rabbitmqctl %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// foreignRabbitUser starts making a second RabbitMQ user, deleted when the
// test ends, and returns a function that waits for it. Where it cannot be
// made, the user_id case is left out with a note, except under CI, where
// that fails the test.
func foreignRabbitUser(t *testing.T, broker *url.URL) func() *nodeUser {
	t.Helper()
	made := make(chan rabbitUser, 1)
	go func() { made <- addRabbitUser() }()
	wait := sync.OnceValue(func() rabbitUser { return <-made })
	t.Cleanup(func() {
		if u := wait(); u.err == nil {
			if err := rabbitmqctl("", "delete_user", u.name); err != nil {
				t.Errorf("delete the test's RabbitMQ user: %v", err)
			}
		}
	})
	return func() *nodeUser {
		t.Helper()
		u := wait()
		if u.err != nil {
			if os.Getenv("CI") == "true" {
				t.Errorf("a second RabbitMQ user is needed for the user_id case: %v", u.err)
			} else {
				t.Logf("leaving out the user_id case: no second RabbitMQ user (%v)", u.err)
			}
			return nil
		}
		withUser := *broker
		withUser.User = url.UserPassword(u.name, u.password)
		return &nodeUser{URL: withUser.String(), User: u.name}
	}
}

// redeclarePlain deletes each queue and declares it again, durable and with
// no arguments.
func redeclarePlain(t *testing.T, r *rabbit, queues map[string]string) {
	t.Helper()
	ch, err := r.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, q := range queues {
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			t.Fatalf("delete %s: %v", q, err)
		}
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatalf("declare %s: %v", q, err)
		}
	}
}

func writeJSONFile(t *testing.T, path string, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
