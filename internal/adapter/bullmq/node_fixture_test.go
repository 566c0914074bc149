package bullmq_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// nodeDir is e2e/node, where bullmq_worker.js and the pinned bullmq are.
func nodeDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../../e2e/node")
	if err != nil {
		t.Fatal(err)
	}
	problem := ""
	if _, err := exec.LookPath("node"); err != nil {
		problem = "node is not installed"
	} else if err := bullmqInstalled(dir); err != nil {
		problem = err.Error()
	}
	if problem != "" {
		msg := problem + "; install Node.js and the pinned bullmq with scripts/node.sh (make node)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// bullmqInstalled checks that node_modules holds the bullmq the lockfile
// pins: a test against another BullMQ would prove nothing about this one.
func bullmqInstalled(dir string) error {
	type lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	var want, got lock
	for path, into := range map[string]*lock{filepath.Join(dir, "package-lock.json"): &want, filepath.Join(dir, "node_modules", ".package-lock.json"): &got} {
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("e2e/node/node_modules is not installed (no %s)", filepath.Base(path))
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, into); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	const pkg = "node_modules/bullmq"
	if w, g := want.Packages[pkg].Version, got.Packages[pkg].Version; w == "" || w != g {
		return fmt.Errorf("e2e/node/node_modules has bullmq %q, the lockfile pins %q", g, w)
	}
	return nil
}

// nodeWorker is e2e/node/bullmq_worker.js on the test's queue: a real
// BullMQ Queue and Worker, driven by commands on its stdin.
type nodeWorker struct {
	t      *testing.T
	stdin  io.WriteCloser
	events chan workerEvent
	cmd    *exec.Cmd

	mu  sync.Mutex
	log []workerEvent
}

// workerEvent is a line bullmq_worker.js printed.
type workerEvent struct {
	Event           string          `json:"event"`
	ID              string          `json:"id"`
	IDs             []string        `json:"ids"`
	Name            string          `json:"name"`
	Data            json.RawMessage `json:"data"`
	AttemptsMade    int             `json:"attemptsMade"`
	AttemptsStarted int             `json:"attemptsStarted"`
	FailedReason    *string         `json:"failedReason"`
	ProcessedOn     *int64          `json:"processedOn"`
	FinishedOn      *int64          `json:"finishedOn"`
	Stacktrace      int             `json:"stacktrace"`
	Opts            map[string]any  `json:"opts"`
	Error           string          `json:"error"`
}

func startWorker(t *testing.T, q testQueue) *nodeWorker { return startNode(t, q, true) }

// startQueue is bullmq_worker.js with a Queue and no Worker: what it
// retries stays waiting.
func startQueue(t *testing.T, q testQueue) *nodeWorker { return startNode(t, q, false) }

func startNode(t *testing.T, q testQueue, worker bool) *nodeWorker {
	t.Helper()
	dir := nodeDir(t)
	cfg, _ := json.Marshal(map[string]any{"host": q.ref.Host, "port": q.ref.Port, "db": q.ref.DB, "prefix": q.ref.Prefix, "queue": q.ref.Queue, "worker": worker})
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "bullmq_worker.js", path)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &nodeWorker{t: t, stdin: stdin, events: make(chan workerEvent, 1000), cmd: cmd}
	go func() {
		defer close(w.events)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e workerEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				e = workerEvent{Event: "error", Error: "not JSON: " + sc.Text()}
			}
			w.mu.Lock()
			w.log = append(w.log, e)
			w.mu.Unlock()
			w.events <- e
		}
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	w.await("ready", "")
	return w
}

// send writes one command to the worker.
func (w *nodeWorker) send(cmd map[string]any) {
	w.t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := w.stdin.Write(append(b, '\n')); err != nil {
		w.t.Fatalf("bullmq_worker.js: %v", err)
	}
}

// await waits for the next event named event (for id, when given),
// failing on an error event or after 30 s; events in between are kept
// in the log only.
func (w *nodeWorker) await(event, id string) workerEvent {
	w.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-w.events:
			if !ok {
				w.t.Fatalf("bullmq_worker.js exited while the test waited for %q", event)
			}
			if e.Event == "error" {
				w.t.Fatalf("bullmq_worker.js: %s", e.Error)
			}
			if e.Event == event && (id == "" || e.ID == id) {
				return e
			}
		case <-deadline:
			w.t.Fatalf("bullmq_worker.js: no %q event in 30 s", event)
		}
	}
}

// add adds jobs with BullMQ's Queue.add and returns their ids.
func (w *nodeWorker) add(jobs ...map[string]any) []string {
	w.t.Helper()
	w.send(map[string]any{"cmd": "add", "jobs": jobs})
	return w.await("added", "").IDs
}

// seen is the log so far, the events named event.
func (w *nodeWorker) seen(event string) []workerEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []workerEvent
	for _, e := range w.log {
		if e.Event == event {
			out = append(out, e)
		}
	}
	return out
}

// waitSeen waits until the log holds an event named event for each of
// ids, in any order: await would pass over those that come first.
func (w *nodeWorker) waitSeen(event string, ids ...string) {
	w.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		seen := map[string]bool{}
		for _, e := range w.seen(event) {
			seen[e.ID] = true
		}
		missing := 0
		for _, id := range ids {
			if !seen[id] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("bullmq_worker.js: %d of %v not %s in 30 s", missing, ids, event)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFailed waits until the failed set holds n jobs.
func waitFailed(t *testing.T, q testQueue, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := q.client.ZCard(t.Context(), q.key("failed")).Val()
		if int(got) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed set holds %d jobs after 30 s, want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
