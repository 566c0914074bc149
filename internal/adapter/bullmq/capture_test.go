package bullmq_test

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/replay"
)

// unknownConnections is a Resolve for a configuration that defines only
// the connection "orders": it records each name it is asked for and
// refuses it with refusal.
type unknownConnections struct {
	mu    sync.Mutex
	names []string
}

func (u *unknownConnections) resolve(name string) (bullmq.Ref, error) {
	u.mu.Lock()
	u.names = append(u.names, name)
	u.mu.Unlock()
	return bullmq.Ref{}, refusal(name)
}

func (u *unknownConnections) asked() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.names...)
}

// refusal is what a configuration that defines only "orders" says of a
// queue's name.
func refusal(name string) error {
	conn, _, err := bullmq.SplitName(name)
	if err != nil {
		return err
	}
	return &config.UnknownConnectionError{Name: conn, System: bullmq.System, Known: []string{"orders"}}
}

// trap is a TCP port that nothing should connect to: a queue's name from
// before connections had names, bullmq://127.0.0.1:PORT/0/…, names it.
type trap struct {
	l *net.TCPListener
}

func newTrap(t *testing.T) *trap {
	t.Helper()
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return &trap{l: l}
}

// legacyName is a queue's name as letters carried it before connections
// had names: the trap's server, which must never be dialled from a name.
func (p *trap) legacyName() string {
	return "bullmq://" + p.l.Addr().String() + "/0/bull/expiry"
}

// untouched fails t when anything connected to the trap. A client that
// connected has finished its handshake before the call that dialled
// returned, so the connection, if any, is already waiting to be accepted.
func (p *trap) untouched(t *testing.T) {
	t.Helper()
	_ = p.l.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if c, err := p.l.Accept(); err == nil {
		_ = c.Close()
		t.Error("a connection was made to the server a queue's name gave")
	}
}

// TestRetrierRefusesAnUnknownConnection: a letter whose queue's
// connection the configuration does not define fails its item with
// Resolve's reason, and nothing is dialled, not even a server its name
// seems to give.
func TestRetrierRefusesAnUnknownConnection(t *testing.T) {
	t.Parallel()
	p := newTrap(t)
	resolve := &unknownConnections{}
	r := bullmq.NewRetrier(resolve.resolve)
	t.Cleanup(func() { _ = r.Close() })
	names := []string{"bullmq://elsewhere/bull/expiry", p.legacyName()}
	for i, name := range names {
		m := replay.Message{System: bullmq.System, RoutingKey: name, Item: int64(i + 1),
			Headers: map[string]any{replay.HeaderReplayRequest: int64(7), replay.HeaderReplayItem: int64(i + 1)},
			Job:     replay.JobRef{ID: "1", Incarnation: "1700000000000:3"}}
		want := refusal(name)
		var failure *replay.PublishFailure
		if err := publish(t, r, m); !errors.As(err, &failure) || !strings.Contains(failure.Reason, want.Error()) {
			t.Errorf("%s: %v; want the item failed with %q", name, err, want)
		}
		if _, exists, _ := r.QueueDepth(t.Context(), name); exists {
			t.Errorf("QueueDepth(%s) says it exists", name)
		}
	}
	// Publish and QueueDepth each ask once, with the name as given.
	if got, want := resolve.asked(), []string{names[0], names[0], names[1], names[1]}; !slices.Equal(got, want) {
		t.Errorf("Resolve was asked %q; want %q", got, want)
	}
	p.untouched(t)
}

// TestConsumersRefuseAnUnknownConnection: the handler check of a target
// whose connection the configuration does not define is Resolve's error,
// and nothing is dialled.
func TestConsumersRefuseAnUnknownConnection(t *testing.T) {
	t.Parallel()
	p := newTrap(t)
	for i, name := range []string{"bullmq://elsewhere/bull/expiry", p.legacyName()} {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			resolve := &unknownConnections{}
			want := refusal(name)
			got, err := bullmq.Consumers{Resolve: resolve.resolve}.TargetConsumers(t.Context(),
				[]replay.Target{{System: bullmq.System, RoutingKey: name, Connection: "elsewhere", Letters: 1}})
			if err == nil || !strings.Contains(err.Error(), want.Error()) {
				t.Errorf("TargetConsumers = %v, %v; want %q", got, err, want)
			}
			if asked := resolve.asked(); len(asked) != 1 || asked[0] != name {
				t.Errorf("Resolve was asked %q; want %q", asked, name)
			}
		})
	}
	p.untouched(t)
}
