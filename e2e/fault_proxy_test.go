package e2e_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// faultProxy is a toxiproxy proxy run inside the test process, on a free
// port of its own, in front of one of the machine's servers: expiryctl is
// pointed at it, and the test adds and removes toxics while it runs.
type faultProxy struct {
	proxy *toxiproxy.Proxy
}

// newFaultProxy starts a proxy to upstream (host:port), stopped when the
// test ends.
func newFaultProxy(t testing.TB, upstream string) *faultProxy {
	t.Helper()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(server, strings.ReplaceAll(t.Name(), "/", "_"), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("start a fault proxy to %s: %v", upstream, err)
	}
	t.Cleanup(p.Stop)
	return &faultProxy{proxy: p}
}

// address is where the proxy listens.
func (fp *faultProxy) address() string { return fp.proxy.Listen }

// through returns rawURL with its host and port replaced by the proxy's.
func (fp *faultProxy) through(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = fp.address()
	return u.String()
}

// add adds toxics, each a toxiproxy JSON toxic ({"type": …, "stream": …,
// "attributes": …}), to the proxy's links, existing and new.
func (fp *faultProxy) add(t testing.TB, toxics ...string) {
	t.Helper()
	for _, js := range toxics {
		if _, err := fp.proxy.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			t.Fatalf("add toxic %s: %v", js, err)
		}
	}
}

// clear removes every toxic: the network is healthy again.
func (fp *faultProxy) clear() {
	fp.proxy.Toxics.ResetToxics(context.Background())
}
