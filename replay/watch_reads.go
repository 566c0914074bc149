package replay

import "context"

// UnauditedReads are the reads of a Service that write no audit row. They
// serve views that redraw on a timer after one audited read, such as
// `replay show --watch` and `replay list --watch`, which are audited once
// per watch; anything else reads through the Service itself.
type UnauditedReads struct{ s *Service }

// Unaudited returns s's reads without their audit rows.
func (s *Service) Unaudited() UnauditedReads { return UnauditedReads{s} }

// Show is Service.Show without its audit row, for a failure too.
func (u UnauditedReads) Show(ctx context.Context, id int64, sample int) (Detail, error) {
	return u.s.detail(ctx, id, sample)
}

// List is Service.List without its replay.list row. It still expires the
// requests whose window has passed, which is a change of state and is
// audited as one (replay.expire), so that the listing never shows a request
// as pending or approved once it can no longer run.
func (u UnauditedReads) List(ctx context.Context, status Status, limit int) ([]Request, error) {
	if err := inTx(ctx, u.s.Pool, func(t tables) error { return t.RequestExpireStale(ctx, u.s.Actor) }); err != nil {
		return nil, err
	}
	return u.s.listWithRunners(ctx, status, limit)
}
