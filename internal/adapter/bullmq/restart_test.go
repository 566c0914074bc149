package bullmq_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
)

// ownRedis is a redis-server of the test's own, on a free port, whose
// data survives a restart (append-only file in a temporary directory):
// a test that stops Redis never stops the machine's.
type ownRedis struct {
	t    *testing.T
	port int
	dir  string
	cmd  *exec.Cmd
}

func startOwnRedis(t *testing.T) *ownRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed; scripts/services.sh installs it")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	r := &ownRedis{t: t, port: port, dir: t.TempDir()}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *ownRedis) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *ownRedis) start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "yes", "--appendfsync", "always", "--dir", r.dir, "--logfile", filepath.Join(r.dir, "redis.log"))
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
			r.t.Fatalf("redis-server on %s did not answer in 10 s:\n%s", r.addr(), log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends this test's redis-server, by its own process.
func (r *ownRedis) stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
	r.cmd = nil
}

// TestSourceWaitsOutARedisRestart: a capture that follows the queue goes
// on after its Redis restarts, delivering what failed since, without
// delivering again what it delivered before; a Redis gone for longer
// than LostAfter ends the deliveries with Err.
func TestSourceWaitsOutARedisRestart(t *testing.T) {
	t.Parallel()
	server := startOwnRedis(t)
	q := bullmqtest.NewQueueOn(t, server.addr())
	seed(t, q, bullmq.TestedVersion, failedJob{ID: "1", FinishedOn: time.Now().UnixMilli()})
	src := openSource(t, q, bullmq.SourceOptions{LostAfter: 3 * time.Second, Poll: 50 * time.Millisecond})
	receive(t, src, 1)

	server.stop()
	time.Sleep(500 * time.Millisecond) // polls fail meanwhile
	server.start()
	seed(t, q, "", failedJob{ID: "2", FinishedOn: time.Now().UnixMilli()})
	if got := ids(receive(t, src, 1)); got[0] != "2" {
		t.Errorf("after the restart delivered %v, want 2", got)
	}
	quiet(t, src, 200*time.Millisecond)
	if src.Err() != nil {
		t.Errorf("Err = %v after a short restart", src.Err())
	}

	server.stop()
	select {
	case _, ok := <-src.Deliveries():
		if ok {
			t.Fatal("delivered with Redis down")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the source still waits 15 s after Redis went away for good")
	}
	if err := src.Err(); err == nil {
		t.Error("deliveries closed with no Err")
	} else {
		t.Logf("lost: %v", err)
	}
}
