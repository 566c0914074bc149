package bullmq

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/expiryctl/expiryctl/replay"
)

//go:embed retry.lua
var retryLua string

// retryScript is sent once per server and then run by its SHA
// (EVALSHA, falling back to EVAL when the server lost its script cache).
var retryScript = redis.NewScript(retryLua)

// maxRetrying is how many retries a Retrier has in flight: each is one
// EVALSHA, and a window of a thousand would open as many connections.
const maxRetrying = 64

// Retrier is the replay runner's target on BullMQ (a replay.Broker): it
// retries each captured job where it is, as BullMQ's Job.retry() does in
// the release the queue's meta names (5 or 6, which differ in where a
// paused queue keeps its jobs), so that a BullMQ Worker takes it as an
// ordinary retry. One Lua script does it atomically: it reads the release
// and retries the job only while the failed set still holds the
// incarnation the letter captured, writes the replay's marks on the job
// hash (MarkField) in the same step, and confirms without moving
// it again a job those marks say this item of this request already
// retried, so a resumed run retries each job once.
type Retrier struct {
	resolve Resolve
	// retrying bounds the scripts in flight.
	retrying chan struct{}

	mu      sync.Mutex
	clients map[string]redis.UniversalClient // by connection
	sends   sync.WaitGroup
}

// NewRetrier returns a retrier that reaches each job's Redis as resolve
// says for its queue's name: a letter's queue name carries a connection's
// name, never a server or credentials, and resolve finds them in the
// operator's configuration. A client is made once per connection and
// closed by Close.
func NewRetrier(resolve Resolve) *Retrier {
	return &Retrier{resolve: resolve, retrying: make(chan struct{}, maxRetrying), clients: make(map[string]redis.UniversalClient)}
}

// client is the client of ref's connection, made at its first use.
func (r *Retrier) client(_ context.Context, ref Ref) (redis.UniversalClient, error) {
	key := ref.Conn
	r.mu.Lock()
	c, ok := r.clients[key]
	r.mu.Unlock()
	if ok {
		return c, nil
	}
	c = Dial(ref)
	r.mu.Lock()
	defer r.mu.Unlock()
	if other, ok := r.clients[key]; ok {
		_ = c.Close()
		return other, nil
	}
	r.clients[key] = c
	return c, nil
}

// Publish implements replay.Broker: it retries the job m.Job names in the
// queue m.RoutingKey names (the letter's own queue) and settles when the
// script answered. The outcome is nil when the job was retried, or had
// been by this item of this request; a *replay.JobMovedOnError when the
// job is gone or no longer the failure captured; a *replay.PublishFailure
// when the message is not one for BullMQ, the queue's BullMQ version is
// not supported, or the queue does not exist (the reason says under which
// prefix Redis holds a queue of that name, if any); a
// *replay.BrokerLostError when Redis did not answer, so nobody knows
// whether the script ran (a resumed run finds out by the marks).
func (r *Retrier) Publish(ctx context.Context, m replay.Message) (replay.Pending, error) {
	sent := &retrying{done: make(chan struct{})}
	r.sends.Add(1)
	go func() {
		defer r.sends.Done()
		defer close(sent.done)
		select {
		case r.retrying <- struct{}{}:
		case <-ctx.Done():
			sent.err = &replay.BrokerLostError{Err: fmt.Errorf("the run stopped before the job was retried: %w", ctx.Err())}
			return
		}
		defer func() { <-r.retrying }()
		sent.err = r.retry(ctx, m)
	}()
	return sent, nil
}

// Outcome codes of retry.lua.
const (
	outcomeRetried = "retried"
	outcomeMarked  = "marked"
	outcomeDeleted = "deleted"
	outcomeMoved   = "moved"
	outcomeVersion = "version"
	outcomeMissing = "missing"
)

func (r *Retrier) retry(ctx context.Context, m replay.Message) error {
	refuse := func(reason string) error {
		return &replay.PublishFailure{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Reason: reason}
	}
	// The runner names the system; a message that names none is taken by
	// its queue's name, which says BullMQ unambiguously.
	if (m.System != System && m.System != "") || m.Exchange != "" || !IsRef(m.RoutingKey) {
		return refuse("not a job for BullMQ: a BullMQ replay retries a job captured from a BullMQ queue, in that queue")
	}
	ref, err := r.resolve(m.RoutingKey)
	if err != nil {
		return refuse(err.Error())
	}
	finishedOn, attemptsMade, ok := strings.Cut(m.Job.Incarnation, ":")
	if m.Job.ID == "" || !ok {
		return refuse(fmt.Sprintf("the letter names no BullMQ job and incarnation (job %q, incarnation %q)", m.Job.ID, m.Job.Incarnation))
	}
	c, err := r.client(ctx, ref)
	if err != nil {
		return &replay.BrokerLostError{Err: err}
	}
	marks, err := json.Marshal(m.Headers)
	if err != nil {
		return refuse(fmt.Sprintf("the replay's marks are not JSON: %v", err))
	}
	res, err := runRetry(ctx, c, ref, m.Job.ID, finishedOn, attemptsMade, marks, markText(m.Headers[replay.HeaderReplayRequest]), strconv.FormatInt(m.Item, 10))
	if err != nil {
		return &replay.BrokerLostError{Err: fmt.Errorf("retry job %s of %s: %w", m.Job.ID, ref.Name(), err)}
	}
	switch res.code {
	case outcomeRetried, outcomeMarked:
		return nil
	case outcomeDeleted:
		return &replay.JobMovedOnError{JobID: m.Job.ID, Now: "deleted"}
	case outcomeMoved:
		return &replay.JobMovedOnError{JobID: m.Job.ID, Now: res.detail}
	case outcomeVersion:
		return refuse((&UnsupportedVersionError{Queue: ref.Name(), Version: res.detail}).Error())
	case outcomeMissing:
		return refuse(notFound(ctx, c, ref).Error())
	}
	return &replay.BrokerLostError{Err: fmt.Errorf("retry job %s of %s: the script answered %q", m.Job.ID, ref.Name(), res.code)}
}

// markText is a mark's value as retry.lua compares it: integers in
// decimal, text as it is.
func markText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.Trim(string(b), `"`)
}

// retryResult is retry.lua's answer.
type retryResult struct{ code, detail string }

func runRetry(ctx context.Context, c redis.Scripter, ref Ref, id, finishedOn, attemptsMade string, marks []byte, request, item string) (retryResult, error) {
	k := keysOf(ref)
	keys := []string{k.job(id), k.of("events"), k.of("failed"), k.of("wait"), k.of("meta"), k.of("paused"),
		k.of("active"), k.of("marker"), k.of("prioritized"), k.of("pc"), k.of("completed"), k.of("delayed"), k.of("waiting-children")}
	v, err := retryScript.Run(ctx, c, keys, id, finishedOn, attemptsMade, marks, request, item, MarkField, version5, version6).StringSlice()
	if err != nil {
		return retryResult{}, err
	}
	if len(v) != 2 {
		return retryResult{}, fmt.Errorf("the retry script answered %q", v)
	}
	return retryResult{code: v[0], detail: v[1]}, nil
}

// QueueDepth implements replay.Broker: the jobs a worker of queue (a
// bullmq:// name) may take now, waiting, paused or prioritized; where a
// retry puts a job (BullMQ 6 keeps a paused queue's jobs in wait, so its
// paused list holds only what BullMQ 5 left there). Delayed jobs are not
// counted: a retry never delays, and they are not yet the workers'
// backlog. exists is false when the queue has no meta hash, which every
// BullMQ Queue writes.
func (r *Retrier) QueueDepth(ctx context.Context, queue string) (depth int, exists bool, err error) {
	ref, err := r.resolve(queue)
	if err != nil {
		return 0, false, err
	}
	c, err := r.client(ctx, ref)
	if err != nil {
		return 0, false, err
	}
	counts, err := counts(ctx, c, ref)
	if err != nil {
		return 0, false, err
	}
	return counts.Waiting + counts.Paused + counts.Prioritized, counts.Exists, nil
}

// Close waits for the retries in flight to settle and closes the clients
// the retrier dialled.
func (r *Retrier) Close() error {
	r.sends.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	for k, c := range r.clients {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
		delete(r.clients, k)
	}
	return first
}

// retrying is a retry on its way (a replay.Pending).
type retrying struct {
	done chan struct{}
	err  error
}

func (s *retrying) Done() <-chan struct{} { return s.done }
func (s *retrying) Outcome() error        { return s.err }
