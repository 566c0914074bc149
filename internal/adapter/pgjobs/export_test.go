package pgjobs

import (
	"cmp"
	"context"
)

// PollerExec runs sql on one of p's own sessions, for a test that shows
// what they refuse.
func PollerExec[ID cmp.Ordered, J any](p *Poller[ID, J], sql string) error {
	_, err := p.pool.Exec(context.Background(), sql)
	return err
}
