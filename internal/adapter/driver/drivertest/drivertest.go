// Package drivertest is the conformance suite every queue system's
// driver passes, in the manner of river's riverdrivertest. Run holds a
// driver to what the core may assume of any system without connecting:
// its traits agree with each other and with its words, its page exists,
// its configuration rules are its own. RunJobStore holds a job store's
// driver, on a store of the test's own, to what the commands do with it
// through the seam alone: names that round-trip and name no server, no
// secret in anything printed, no login taken from the operating system, a
// server that does not answer told apart as exit 5, capture, retry and
// the live view opened through the driver, and a missing queue refused.
//
// What a capture and a retry must do with each job is the suites of
// deadletter/sourcetest and replay/brokertest, which each driver also
// runs; this suite covers what the driver adds around them.
package drivertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
)

// systemName is what a system's name may be: it is a column's value and
// a metrics label.
var systemName = regexp.MustCompile(`^[a-z][a-z0-9]{1,30}$`)

// Run holds d to the cases that need no server (D1–D4).
func Run(t *testing.T, d driver.Driver) {
	tr, w := d.Traits(), d.Words()
	t.Run("D1TraitsAgree", func(t *testing.T) {
		if !systemName.MatchString(string(tr.System)) {
			t.Errorf("system %q is not a lowercase name", tr.System)
		}
		_, isStore := d.(driver.JobStore)
		if tr.RetriesInPlace != isStore {
			t.Errorf("RetriesInPlace %v, but the driver is a job store: %v", tr.RetriesInPlace, isStore)
		}
		if tr.NamesConnectionInQueue && tr.QueuePrefix != string(tr.System)+"://" {
			t.Errorf("a queue's name holds its connection, but its prefix %q is not the system's name and \"://\" (deadletter.QueueSystem reads the system from it)", tr.QueuePrefix)
		}
		if tr.NamesConnectionInQueue == (tr.DefaultConnection != "") {
			t.Errorf("NamesConnectionInQueue %v with DefaultConnection %q: a letter's connection comes from exactly one",
				tr.NamesConnectionInQueue, tr.DefaultConnection)
		}
		if tr.DefaultConnection != "" && !config.ValidName(tr.DefaultConnection) {
			t.Errorf("DefaultConnection %q is no connection's name (%s)", tr.DefaultConnection, config.NameRule)
		}
	})
	t.Run("D2WordsAgree", func(t *testing.T) {
		for field, v := range map[string]string{"Title": w.Title, "Server": w.Server, "Doc": w.Doc, "QueueForm": w.QueueForm} {
			if v == "" {
				t.Errorf("Words.%s is empty", field)
			}
		}
		if !systemName.MatchString(w.ServerLabel) {
			t.Errorf("ServerLabel %q is not a metrics label", w.ServerLabel)
		}
		if !strings.HasPrefix(w.QueueForm, tr.QueuePrefix) {
			t.Errorf("QueueForm %q does not begin with the prefix %q", w.QueueForm, tr.QueuePrefix)
		}
		if _, isStore := d.(driver.JobStore); isStore && (w.Captures == "" || !strings.HasPrefix(w.URLForm, tr.QueuePrefix)) {
			t.Errorf("a job store's help says what it captures (%q) and how its URL is typed (%q, beginning %q)", w.Captures, w.URLForm, tr.QueuePrefix)
		}
		for _, env := range []string{w.PasswordEnv, w.UserEnv} {
			if env != "" && !strings.HasPrefix(env, "EXPIRYCTL_") {
				t.Errorf("environment variable %s is not expiryctl's (EXPIRYCTL_…)", env)
			}
		}
	})
	t.Run("D3DocumentedPageExists", func(t *testing.T) {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, w.Doc)); err != nil {
			t.Errorf("the system's page %s: %v", w.Doc, err)
		}
	})
	t.Run("D4ConfigIsItsOwn", func(t *testing.T) {
		rules := d.Config()
		if rules.System != string(tr.System) {
			t.Errorf("the configuration's rules are for %q, the driver's system is %q", rules.System, tr.System)
		}
		if len(rules.Keys) == 0 || rules.Check == nil {
			t.Error("the configuration's rules name no key or check nothing")
		}
	})
	t.Run("D5ConsumersAsWordsSay", func(t *testing.T) {
		// A request must vouch for the handler exactly when nothing shows
		// which handler the consumers run.
		if unverifiable := tr.Evidence != driver.VersionedConsumers; unverifiable != (w.ConsumersUnseen != "") {
			t.Errorf("Evidence %v with ConsumersUnseen %q: a system that shows no consumers, or not their versions, says why, and only such a one",
				tr.Evidence, w.ConsumersUnseen)
		}
		if s, ok := d.(driver.JobStore); ok {
			none := s.Consumers(func(string) (driver.Ref, error) { return nil, errors.New("unused") }) == nil
			if none != (tr.Evidence == driver.NoConsumers) {
				t.Errorf("Consumers reader absent: %v, evidence %d", none, tr.Evidence)
			}
		}
	})
}

// JobStoreHarness is one job-store driver on a store of the test's own.
type JobStoreHarness struct {
	Driver driver.JobStore
	// Connection reaches the store as the operator's configuration would
	// name it, logging in with Password.
	Connection config.Connection
	Password   string
	// Queue is a queue's part as RefFor takes it; Missing one that does
	// not exist on the store.
	Queue, Missing string
	// URL is Queue typed on a command line as a URL, with its login and
	// no password.
	URL string
	// Env is what the driver may ask of the command's world.
	Env driver.Env
	// Fail makes n jobs of Queue fail for good.
	Fail func(t *testing.T, n int)
}

// wait bounds each wait for the store.
const wait = 30 * time.Second

// secret is a password no store holds, to look for in what is printed.
const secret = "Zq7-not-printed-8Lw"

// RunJobStore runs the job-store cases (J1–J8) on setup's harness, each on
// a store of its own.
func RunJobStore(t *testing.T, setup func(t *testing.T) JobStoreHarness) {
	t.Run("J1NamesRoundTrip", func(t *testing.T) {
		h := setup(t)
		s, tr := h.Driver, h.Driver.Traits()
		ref := refFor(t, h, h.Password, h.Queue)
		name := ref.Name()
		if !strings.HasPrefix(name, tr.QueuePrefix+h.Connection.Name+"/") {
			t.Errorf("name %q does not begin with %q", name, tr.QueuePrefix+h.Connection.Name+"/")
		}
		if !s.IsRef(name) {
			t.Errorf("IsRef(%q) is false", name)
		}
		conn, queue, err := s.SplitName(name)
		if err != nil || conn != h.Connection.Name {
			t.Fatalf("SplitName(%q) = %q, %q, %v", name, conn, queue, err)
		}
		if again := refFor(t, h, h.Password, queue); again.Name() != name {
			t.Errorf("the queue's part %q names %q again, want %q", queue, again.Name(), name)
		}
		host := hostOf(t, h.Connection)
		if strings.Contains(name, host) {
			t.Errorf("name %q holds the server %q: a letter names its connection, never a server", name, host)
		}
		if _, _, err := s.SplitName(tr.QueuePrefix + "/" + h.Queue); err == nil {
			t.Error("a name with no connection splits without error")
		}
	})
	t.Run("J2NothingPrintedHoldsTheSecret", func(t *testing.T) {
		h := setup(t)
		ref := refFor(t, h, secret, h.Queue)
		for _, shown := range []string{ref.Name(), ref.Server(), fmt.Sprintf("%v|%+v|%s|%#v", ref, ref, ref, ref)} {
			if strings.Contains(shown, secret) {
				t.Errorf("the reference shows its password: %s", shown)
			}
		}
	})
	t.Run("J3TypedURLLogsInAsNamed", func(t *testing.T) {
		h := setup(t)
		s, w := h.Driver, h.Driver.Words()
		ref, _, err := s.ParseURL(h.URL, driver.Env{Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatalf("ParseURL(%s): %v", h.URL, err)
		}
		if !strings.HasPrefix(ref.Name(), h.Driver.Traits().QueuePrefix) || ref.Server() == "" {
			t.Errorf("the URL's reference is %q on %q", ref.Name(), ref.Server())
		}
		if w.UserEnv == "" {
			return // the system has no logins (Redis's ACL user is the URL's own)
		}
		u, err := url.Parse(h.URL)
		if err != nil {
			t.Fatal(err)
		}
		u.User = nil
		bare := u.String()
		if _, _, err := s.ParseURL(bare, driver.Env{Getenv: func(string) string { return "" }}); err == nil {
			t.Errorf("ParseURL(%s) with no login anywhere succeeded: it must not fall back to the operating system's user", bare)
		}
		env := driver.Env{Getenv: func(k string) string {
			if k == w.UserEnv {
				return "from-env"
			}
			return ""
		}}
		if _, _, err := s.ParseURL(bare, env); err != nil {
			t.Errorf("ParseURL(%s) with %s set: %v", bare, w.UserEnv, err)
		}
	})
	t.Run("J4SilentServerIsUnavailable", func(t *testing.T) {
		h := setup(t)
		dead := h.Connection
		dead.URLs = []string{withPort(t, h.Connection.URLs[0], closedPort(t))}
		ref, err := h.Driver.RefFor(dead, secret, h.Queue)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		src, err := h.Driver.OpenSource(ctx, ref, h.Env, 10)
		if err == nil {
			_ = src.Close()
			t.Fatal("a source opened on a port where nothing listens")
		}
		if !h.Driver.Unreachable(err) || !h.Driver.ServerError(err) {
			t.Errorf("a server that does not answer: Unreachable %v, ServerError %v (%v)", h.Driver.Unreachable(err), h.Driver.ServerError(err), err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows the password: %v", err)
		}
	})
	t.Run("J5CapturesThroughTheSeam", func(t *testing.T) {
		h := setup(t)
		h.Fail(t, 3)
		ref := refFor(t, h, h.Password, h.Queue)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		src, err := h.Driver.OpenSource(ctx, ref, h.Env, 10)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		if src.QueueName() != ref.Name() {
			t.Errorf("the source names its queue %q, letters %q", src.QueueName(), ref.Name())
		}
		seen := map[string]bool{}
		for len(seen) < 3 {
			select {
			case d, ok := <-src.Deliveries():
				if !ok {
					t.Fatalf("deliveries ended after %d", len(seen))
				}
				if d.Message.System != h.Driver.Traits().System {
					t.Errorf("a letter of system %q from the %s driver", d.Message.System, h.Driver.Traits().System)
				}
				seen[d.Message.MessageID+"/"+fmt.Sprint(d.Tag)] = true
			case <-ctx.Done():
				t.Fatalf("%d of 3 failed jobs delivered", len(seen))
			}
		}
	})
	t.Run("J6LiveViewCountsFailedJobs", func(t *testing.T) {
		h := setup(t)
		h.Fail(t, 2)
		ref := refFor(t, h, h.Password, h.Queue)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		report, err := h.Driver.Topology(ctx, ref, h.Env)
		if err != nil || report.Unavailable != "" {
			t.Fatalf("Topology: %v %s", err, report.Unavailable)
		}
		if got := report.States().Isolated; got != 2 {
			t.Errorf("the live view counts %d failed jobs, want 2", got)
		}
	})
	t.Run("J7RetrierSeesTheQueue", func(t *testing.T) {
		h := setup(t)
		h.Fail(t, 1)
		ref := refFor(t, h, h.Password, h.Queue)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		resolve := func(name string) (driver.Ref, error) {
			if name != ref.Name() {
				return nil, fmt.Errorf("no queue %s here", name)
			}
			return ref, nil
		}
		b, err := h.Driver.OpenRetrier(ctx, ref, h.Env, resolve)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, exists, err := b.QueueDepth(ctx, ref.Name()); err != nil || !exists {
			t.Errorf("QueueDepth of the queue: exists %v, %v", exists, err)
		}
	})
	t.Run("J8MissingQueueRefused", func(t *testing.T) {
		h := setup(t)
		ref := refFor(t, h, h.Password, h.Missing)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		b, err := h.Driver.OpenRetrier(ctx, ref, h.Env, func(string) (driver.Ref, error) { return ref, nil })
		if err == nil {
			defer b.Close()
			_, exists, err := b.QueueDepth(ctx, ref.Name())
			if err == nil && exists {
				t.Errorf("a queue that does not exist is said to exist")
			}
			if err != nil && !errors.Is(err, deadletter.ErrQueueNotFound) {
				t.Errorf("a missing queue: %v, want deadletter.ErrQueueNotFound", err)
			}
		} else if !errors.Is(err, deadletter.ErrQueueNotFound) {
			t.Errorf("a missing queue: %v, want deadletter.ErrQueueNotFound", err)
		}
		// A capture of it ends, even a followed one: nothing waits for a
		// queue that is not there to come back.
		src, err := h.Driver.OpenSource(ctx, ref, h.Env, 10)
		if err == nil {
			_ = src.Close()
			t.Fatal("a capture of a queue that does not exist opened")
		}
		if !errors.Is(err, deadletter.ErrQueueNotFound) || h.Driver.Unreachable(err) {
			t.Errorf("a capture of a missing queue: %v (unreachable: %v), want deadletter.ErrQueueNotFound, not an outage to wait out",
				err, h.Driver.Unreachable(err))
		}
		if h.Driver.Unreachable(errors.New("no such connection")) {
			t.Error("an error no server gave is taken for an outage, to be waited out")
		}
	})
}

func refFor(t *testing.T, h JobStoreHarness, password, queue string) driver.Ref {
	t.Helper()
	ref, err := h.Driver.RefFor(h.Connection, password, queue)
	if err != nil {
		t.Fatalf("RefFor(%s, %q): %v", h.Connection.Name, queue, err)
	}
	return ref
}

func hostOf(t *testing.T, c config.Connection) string {
	t.Helper()
	u, err := url.Parse(c.URLs[0])
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// closedPort is a port of 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	_ = l.Close()
	return port
}

func withPort(t *testing.T, raw, port string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = net.JoinHostPort("127.0.0.1", port)
	return u.String()
}

// moduleRoot is the folder of go.mod above the test's working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
