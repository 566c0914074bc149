package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
)

// runTimeout bounds one command. Every command these tests run finishes in a
// few seconds; the bound turns a hang into a failure with the output so far
// instead of a stuck test binary.
const runTimeout = 60 * time.Second

// cli runs the binary with one test's database and broker. Its methods take
// the (sub)test to fail, so that one cli serves a test and its subtests.
type cli struct {
	env []string
}

// newCLI returns a cli whose commands reach dbURL and the test broker as
// actor. The servers are passed through EXPIRYCTL_* so that tests that need
// a flag can still add one, which wins over the environment.
func newCLI(dbURL, actor string) *cli {
	env := make([]string, 0, len(os.Environ())+3)
	for _, kv := range os.Environ() {
		// A developer's own EXPIRYCTL_* settings must never point a test at a
		// real archive or a classifier file the test does not know about.
		if !strings.HasPrefix(kv, "EXPIRYCTL_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		// Nor a configuration file of theirs: a test that needs one
		// names its own (withConfig).
		"EXPIRYCTL_CONFIG="+os.DevNull,
		"EXPIRYCTL_DATABASE_URL="+dbURL,
		"EXPIRYCTL_AMQP_URL="+amqptest.URL(),
		"EXPIRYCTL_ACTOR="+actor,
	)
	return &cli{env: env}
}

// result is how one run of the binary ended.
type result struct {
	args   []string
	code   int
	stdout string
	// stderr is what the command said on stderr, less the advisory line a
	// superuser's or owner's connection prints (see advisory).
	stderr string
	// advisory is true when the command said governance is advisory for
	// its connection.
	advisory bool
}

// advisoryPrefix starts the line a governed command prints when its login
// is a superuser or the schema's owner.
const advisoryPrefix = "warning: "

// splitAdvisory takes the advisory line out of stderr.
func splitAdvisory(stderr string) (string, bool) {
	var kept []string
	found := false
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if strings.HasPrefix(line, advisoryPrefix) && strings.Contains(line, "governance is advisory") {
			found = true
			continue
		}
		kept = append(kept, line)
	}
	return strings.Join(kept, ""), found
}

func (r result) String() string {
	return fmt.Sprintf("`expiryctl %s` exited %d\nstdout:\n%s\nstderr:\n%s",
		strings.Join(r.args, " "), r.code, clip(r.stdout), clip(r.stderr))
}

// clip keeps failure messages readable when a command printed megabytes.
func clip(s string) string {
	const limit = 4000
	if len(s) <= limit {
		return s
	}
	return s[:limit] + fmt.Sprintf("\n… (%d more bytes)", len(s)-limit)
}

// run runs the binary to completion.
func (c *cli) run(t testing.TB, args ...string) result {
	t.Helper()
	p := c.start(t, args...)
	return p.wait(runTimeout)
}

// ok runs the binary and fails the test unless it exits 0.
func (c *cli) ok(t testing.TB, args ...string) result {
	t.Helper()
	r := c.run(t, args...)
	if r.code != 0 {
		t.Fatalf("want exit 0: %s", r)
	}
	return r
}

// exits runs the binary and fails the test unless it exits with code.
func (c *cli) exits(t testing.TB, code int, args ...string) result {
	t.Helper()
	r := c.run(t, args...)
	if r.code != code {
		t.Fatalf("want exit %d: %s", code, r)
	}
	return r
}

// process is a running expiryctl.
type process struct {
	t      testing.TB
	args   []string
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
	res    result
}

// start starts the binary and returns without waiting. The process is
// killed when the test ends if it is still running, so a failed assertion
// never leaves an ingester consuming a queue that cleanup is deleting.
func (c *cli) start(t testing.TB, args ...string) *process {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = c.env
	p := &process{t: t, args: args, cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start expiryctl %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		err := cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			code = -1
		}
		stderr, advisory := splitAdvisory(p.stderr.String())
		p.res = result{args: args, code: code, stdout: p.stdout.String(), stderr: stderr, advisory: advisory}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit. A process still running after timeout
// is killed and fails the test with what it printed.
func (p *process) wait(timeout time.Duration) result {
	p.t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Fatalf("still running after %s, killed: %s", timeout, p.res)
		return result{}
	}
}

// signal sends sig to the process; one that already exited is not an error.
func (p *process) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// syncBuffer lets the test read a process's output while exec's copying
// goroutine is still writing it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// withTimeout is a context for the test's own calls to the servers.
func withTimeout(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	t.Cleanup(cancel)
	return ctx
}
