package broker

import (
	"runtime"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
)

// TestClosedConnectionsLeaveTheSilenceTable: a reconnect loop dials a new
// connection per outage, and the table that explains their silences must
// not keep one entry for each of them. Not parallel: it counts the
// package's table.
func TestClosedConnectionsLeaveTheSilenceTable(t *testing.T) {
	before := silenceWatches()
	for range 30 {
		conn, err := DialWith(amqptest.URL(), DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if Broken(conn) != nil {
			t.Fatal("a fresh connection is said to be broken")
		}
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := silenceWatches(); n < before+30 {
		t.Fatalf("%d connections watched after dialling 30, want at least %d", n, before+30)
	}
	deadline := time.Now().Add(10 * time.Second)
	for silenceWatches() > before+2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still watched 10 s after 30 were closed and dropped, %d before them", silenceWatches(), before)
		}
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
}
