package commands

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
	"github.com/expiryctl/expiryctl/reconcile"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
	"github.com/expiryctl/expiryctl/tui"
)

// The terminal UI draws its arrival sparklines when its archive offers them.
var _ service.ArrivalMinuter = (*deadletter.Archive)(nil)

// This file is the one place where services are built, for the commands and
// for the terminal UI alike: each Factory method below connects (once, on
// first use) and returns a service acting as the resolved actor. A command's
// options hold these methods, not the pool, so --help and flag errors never
// dial, and a test replaces them with fakes.

// Archive returns the dead-letter archive; every query it answers is audited.
func (f *Factory) Archive(ctx context.Context) (service.Archive, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return s.archive(), nil
}

// Requests returns the replay and discard requests service.
func (f *Factory) Requests(ctx context.Context) (service.Requests, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return s.requests(), nil
}

// Policy returns the governance policy service.
func (f *Factory) Policy(ctx context.Context) (service.Policy, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return s.policy(), nil
}

// Runner returns the runner of approved requests; it connects to RabbitMQ
// only when it runs a replay.
func (f *Factory) Runner(ctx context.Context) (service.Runner, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return s.runner(), nil
}

// Retention returns the service that redacts letters past the retention
// window.
func (f *Factory) Retention(ctx context.Context) (service.Retention, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return &retention{s}, nil
}

// Ingester returns the service that captures a dead-letter queue.
func (f *Factory) Ingester(ctx context.Context) (service.Ingester, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return &ingester{s}, nil
}

// DLQSource opens a consumer on queue with prefetch unacknowledged letters,
// on the system whose queue names queue has the form of: a driver.Broker's,
// a job store's, else RabbitMQ. A server that does not answer is, on every
// system, a *deadletter.ServerError (exit 5) in its driver's words.
func (f *Factory) DLQSource(queue string, prefetch int) (service.DLQSource, error) {
	if b, ok := brokerNamed(queue); ok {
		return f.brokerSource(b, queue, prefetch)
	}
	if s, ok := f.jobStoreOf(queue); ok {
		return f.jobStoreSource(s, queue, prefetch)
	}
	conn, err := f.AMQP()
	if err != nil {
		return nil, err
	}
	src, err := broker.OpenDLQSource(conn, queue, prefetch)
	if err != nil {
		return nil, err
	}
	return src, nil
}

// Recorder returns a writer of single audit rows.
func (f *Factory) Recorder(ctx context.Context) (service.Recorder, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return s.recorder(), nil
}

// AuditReviewer returns the reader and verifier of the trail.
func (f *Factory) AuditReviewer(ctx context.Context) (service.AuditReviewer, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return s.auditReviewer(), nil
}

// AuditExporter returns the exporter of the trail.
func (f *Factory) AuditExporter(ctx context.Context) (service.AuditExporter, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return &auditExporter{s.recorder()}, nil
}

// AuditSigner returns the signer of checkpoints.
func (f *Factory) AuditSigner(ctx context.Context) (service.AuditSigner, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return &auditSigner{s}, nil
}

// Reconciler returns the comparison of the governance tables with the trail.
func (f *Factory) Reconciler(ctx context.Context) (service.Reconciler, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return &reconciler{s}, nil
}

// Access returns the group membership service.
func (f *Factory) Access(ctx context.Context) (service.Access, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return &access.Service{Pool: s.pool, Actor: s.actor}, nil
}

// Bootstrap runs `access bootstrap` as the connected login, which needs no
// expiryctl schema: a DBA's, before the first migrate.
func (f *Factory) Bootstrap(ctx context.Context, owner string, d store.Deployment, logins []string) (access.BootstrapResult, error) {
	pool, err := f.RawDB(ctx)
	if err != nil {
		return access.BootstrapResult{}, err
	}
	return access.Bootstrap(ctx, pool, owner, d, logins)
}

// Migrator returns the schema migrator. It connects without checking the
// schema, which is what it is there to create.
func (f *Factory) Migrator(ctx context.Context) (service.Migrator, error) {
	// A migration on a large archive may rightly run long.
	f.migrating = true
	pool, err := f.RawDB(ctx)
	if err != nil {
		return nil, err
	}
	return &migrator{&services{pool: pool, actor: f.Actor(), now: f.Now, dial: f.AMQP, outcomes: f.Outcomes}}, nil
}

// TUIServices returns what the terminal UI calls: the same services as the
// commands, over the same connection and actor. Its archive does not audit
// listings, which the UI refreshes on a timer (opening the UI is audited
// once instead, and a letter's payload always is).
func (f *Factory) TUIServices(ctx context.Context) (tui.Services, error) {
	s, err := f.services(ctx)
	if err != nil {
		return tui.Services{}, err
	}
	queues, err := f.LiveQueues(ctx)
	if err != nil {
		return tui.Services{}, err
	}
	self, err := access.SelfOf(ctx, s.pool)
	if err != nil {
		return tui.Services{}, fmt.Errorf("read who this login is: %w", err)
	}
	return tui.Services{
		Archive:  s.archive().WithoutListingAudit(),
		Requests: s.requests(),
		// The requests screen refreshes on a timer: audited once per visit.
		RequestReads: s.requests().Unaudited(),
		LiveQueues:   queues,
		WorkQueue:    worker.NewTopology("").Queue,
		HoldsGap:     s.holdsGap,
		Policy:       s.policy().Load,
		Runner:       &tuiRunner{runner: s.runner(), request: s.request},
		Audit:        &tuiAudit{reviewer: s.auditReviewer()},
		Actor:        s.actor,
		Identity:     tui.Identity{Login: self.Login, Roles: self.Roles, Advisory: len(self.Bypasses) > 0},
		Now:          s.now,
		Systems:      registry.Systems(),
	}, nil
}

// UnauditedArchive returns the archive whose summaries and listings write no
// audit row, for the redraws of a --watch whose first read went through
// Archive; opening a letter (Show) is audited all the same.
func (f *Factory) UnauditedArchive(ctx context.Context) (service.Archive, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return s.archive().WithoutListingAudit(), nil
}

// UnauditedRequests returns the reads of requests that write no audit row,
// for the redraws of a --watch whose first read went through Requests.
func (f *Factory) UnauditedRequests(ctx context.Context) (service.RequestReads, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return s.requests().Unaudited(), nil
}

// services builds every service over one pool, acting as one actor.
type services struct {
	pool  *pgxpool.Pool
	actor string
	now   func() time.Time
	dial  func() (*amqp.Connection, error)
	// amqpNodes is how many nodes --amqp-url lists: a replay run fails
	// over between them when there are several.
	amqpNodes int
	// outcomes opens the reservation database the outcome query runs
	// against; nil pool: expiryctl's own.
	outcomes func(context.Context) (*pgxpool.Pool, error)
	// flow reads the target queues' traffic for plans and pacing; nil
	// where nothing is paced (the migrator).
	flow replay.Flow
	// consumers reads a replay's target queues' consumers (the
	// management API), for `replay show` and the run's handler check.
	consumers replay.Consumers
	// approvals is the runner's rule for signed approvals.
	approvals func() (*replay.ApprovalCheck, error)
	// dlqSource opens a consumer on a dead-letter queue, for a run's
	// capture of its cohort's queues.
	dlqSource func(queue string, prefetch int) (service.DLQSource, error)
	// jobRef is a job store's queue's reference by its name, through the
	// configuration, and env what its driver asks of the command's world.
	jobRef func(jobStore, string) (storeRef, error)
	env    driver.Env
	// adviseLogin says once a connection that a job store's login holds
	// a way around the store's rules.
	adviseLogin func(jobStore, storeRef, any)
	// publishConnection is the connection a publishing system's run goes
	// through (RabbitMQ's, SQS's), by the flags, the environment and the
	// configuration.
	publishConnection func(deadletter.System) (config.Connection, error)
}

// services connects (checking the schema) and resolves the actor.
func (f *Factory) services(ctx context.Context) (*services, error) {
	pool, err := f.DB(ctx)
	if err != nil {
		return nil, err
	}
	return &services{pool: pool, actor: f.Actor(), now: f.Now, dial: f.AMQP, amqpNodes: len(f.AMQPURLs()), outcomes: f.Outcomes, flow: f.flow(),
		consumers: f.Consumers(), approvals: f.ApprovalCheck, dlqSource: f.DLQSource, env: f.jobStoreEnv(), jobRef: f.jobRef, adviseLogin: f.adviseLogin,
		publishConnection: f.publishConnection}, nil
}

func (s *services) archive() *deadletter.Archive { return deadletter.NewArchive(s.pool, s.actor) }

// holdsGap runs the policy's gap query against the reservation database
// (--outcome-url, else expiryctl's own); failing to reach it is the gap
// query's failure, which a summary shows and goes on without. The connect
// and the read share one bound, so that a reservation database that is
// unreachable costs a summary or a scrape replay.GapDeadline at most.
func (s *services) holdsGap(ctx context.Context) (replay.HoldsGap, error) {
	ctx, cancel := context.WithTimeout(ctx, replay.GapDeadline)
	defer cancel()
	reservations, err := s.outcomes(ctx)
	if err != nil {
		return replay.HoldsGap{}, &replay.GapQueryError{Err: err}
	}
	g, err := replay.HoldsPastDeadline(ctx, s.pool, reservations)
	var failed *replay.GapQueryError
	if errors.As(err, &failed) && failed.OwnDatabase {
		// Most deployments keep the reservations elsewhere: a relation
		// that does not exist here says the URL is missing, not that the
		// query is wrong.
		failed.Err = fmt.Errorf("%w; no --outcome-url or EXPIRYCTL_OUTCOME_URL was given: "+
			"give the reservation database's read-only login", failed.Err)
	}
	return g, err
}

// HoldsGap returns the reader of the holds past their deadline at their
// source, for `dlq summary` and `metrics serve`.
func (f *Factory) HoldsGap(ctx context.Context) (service.HoldsGap, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return s.holdsGap, nil
}

func (s *services) requests() *replay.Service {
	return &replay.Service{Pool: s.pool, Actor: s.actor, Consumers: s.consumers}
}

func (s *services) policy() *policyService { return &policyService{s} }

func (s *services) runner() *requestRunner { return &requestRunner{s} }

func (s *services) recorder() *recorder { return &recorder{s} }

func (s *services) auditReviewer() *audit.Reviewer {
	return &audit.Reviewer{Pool: s.pool, Actor: s.actor}
}

// request reads a request without an audit row, for a run's progress
// display (its rate ceiling and canary size).
func (s *services) request(ctx context.Context, id int64) (replay.Request, error) {
	return replay.Get(ctx, s.pool, id)
}

// requestRunner is service.Runner over replay.Runner, with a broker of its
// own for each run.
type requestRunner struct{ *services }

func (r *requestRunner) Run(ctx context.Context, id int64, progress func(replay.Progress)) (replay.RunResult, error) {
	runner, closeBroker, err := r.open(ctx, id)
	if err != nil {
		return replay.RunResult{}, err
	}
	defer closeBroker()
	runner.Progress = progress
	return runner.Run(ctx, id)
}

func (r *requestRunner) DryRun(ctx context.Context, id int64) (replay.DryRunResult, error) {
	runner, closeBroker, err := r.open(ctx, id)
	if err != nil {
		return replay.DryRunResult{}, err
	}
	defer closeBroker()
	return runner.DryRun(ctx, id)
}

// open builds the runner for request id. A discard publishes nothing, so it
// does not dial RabbitMQ; the kind is read here only to decide that, and
// the runner reads the request again under its lock. closeBroker releases
// the broker's channels.
func (r *requestRunner) open(ctx context.Context, id int64) (runner *replay.Runner, closeBroker func(), err error) {
	runner = &replay.Runner{Pool: r.pool, Actor: r.actor, Now: r.now, Consumers: r.consumers}
	if r.approvals != nil {
		if runner.Approvals, err = r.approvals(); err != nil {
			return nil, nil, err
		}
	}
	req, readErr := replay.Get(ctx, r.pool, id)
	if readErr == nil && req.Kind == replay.KindDiscard {
		return runner, func() {}, nil
	}
	if r.outcomes != nil {
		if runner.Outcomes, err = r.outcomes(ctx); err != nil {
			return nil, nil, err
		}
	}
	// Whether the request's jobs are retried where they are is the
	// archive's description of its system, which the migrate took from
	// the driver: never what a letter says.
	var inPlace bool
	if readErr == nil {
		sys, known, err := store.QueueSystemNamed(ctx, r.pool, string(req.System()))
		if err != nil {
			return nil, nil, err
		}
		if !known {
			return nil, nil, fmt.Errorf("replay request %d is for the queue system %q, which this archive does not know: migrate it with this release", id, req.System())
		}
		inPlace = sys.RetriesInPlace
	}
	if readErr == nil && !inPlace {
		if runner.Connection, err = r.publishThrough(req); err != nil {
			return nil, nil, err
		}
	}
	if b, ok := brokerFor(req.System()); ok && readErr == nil {
		return r.openBroker(runner, b)
	}
	if readErr == nil && inPlace {
		return r.openJobStore(ctx, runner, req)
	}
	brokers := &runBrokers{dial: r.dial}
	b, err := brokers.open()
	if err != nil {
		return nil, nil, err
	}
	runner.Broker, runner.Flow = b, r.flow
	runner.OpenDLQ = r.openDLQ
	if r.amqpNodes > 1 {
		// A cluster: a lost node is failed over from, within the run.
		runner.Reconnect = brokers.reconnect
	}
	return runner, brokers.close, nil
}

// publishThrough is the name of the connection a publishing request's
// letters came from, when it is the one this process reaches for the
// request's system; any other is refused before anything connects: the
// configuration, not the letters, says which broker a name is.
func (r *requestRunner) publishThrough(req replay.Request) (string, error) {
	c, err := r.publishConnection(req.System())
	if err != nil {
		return "", err
	}
	for _, t := range req.Targets {
		if want := cmp.Or(t.Connection, implicitConnection(req.System())); want != c.Name {
			return "", &replay.Refusal{Rule: "connection-unknown", Message: fmt.Sprintf(
				"replay request %d publishes through connection %q, where its letters came from, and the %s connection of this context is %q (%s): "+
					"nothing was dialled; run it with the context that names %q (--context), or add that connection to the configuration (docs/configuration.md)",
				req.ID, want, req.System(), c.Name, c.Where, want)}
		}
	}
	return c.Name, nil
}

// runCapturePrefetch is how far ahead the broker may send a run's capture
// of its dead-letter queues, as `dlq ingest` by default.
const runCapturePrefetch = 1000

// openDLQ opens a run's capture of queue as `dlq ingest --follow` opens
// its consumer: a broker that does not answer is unavailable, to be waited
// out; a queue that does not exist cannot be watched.
func (r *requestRunner) openDLQ(_ context.Context, queue string) (deadletter.ClosableSource, error) {
	return openWaitableDLQSource(r.dlqSource, queue, runCapturePrefetch)
}

// policyService is service.Policy over replay's policy functions.
type policyService struct{ *services }

func (p *policyService) Load(ctx context.Context) (replay.Policy, error) {
	return replay.LoadPolicy(ctx, p.pool)
}

func (p *policyService) Show(ctx context.Context) (replay.Policy, []replay.PolicyChange, error) {
	pol, err := replay.LoadPolicy(ctx, p.pool)
	if err != nil {
		return replay.Policy{}, nil, err
	}
	pending, err := replay.PendingPolicyChanges(ctx, p.pool)
	if err != nil {
		return replay.Policy{}, nil, err
	}
	if err := audit.Record(ctx, p.pool, audit.Entry{Actor: p.actor, Action: "policy.show", Target: "policy",
		Details: map[string]any{"pending_changes": len(pending)}}); err != nil {
		return replay.Policy{}, nil, err
	}
	return pol, pending, nil
}

func (p *policyService) Set(ctx context.Context, changes map[string]any, why string) (replay.PolicySetResult, error) {
	return replay.SetPolicyWhy(ctx, p.pool, p.actor, changes, why)
}

func (p *policyService) Review(ctx context.Context, id int64, approve bool, why string) (replay.Policy, error) {
	return replay.ReviewPolicyChange(ctx, p.pool, p.actor, id, approve, why)
}

// retention is service.Retention over deadletter's purge.
type retention struct{ *services }

func (r *retention) Preview(ctx context.Context, olderThan time.Duration) (deadletter.PurgeResult, error) {
	return deadletter.PurgePreview(ctx, r.pool, olderThan)
}

func (r *retention) Purge(ctx context.Context, opts deadletter.PurgeOptions) (deadletter.PurgeResult, error) {
	opts.Actor = r.actor
	return deadletter.Purge(ctx, r.pool, opts)
}

// ingester is service.Ingester over deadletter.Ingest.
type ingester struct{ *services }

func (i *ingester) Ingest(ctx context.Context, src deadletter.Source, opts deadletter.IngestOptions) (deadletter.IngestStats, error) {
	opts.Actor = i.actor
	return deadletter.Ingest(ctx, i.pool, src, opts)
}

// recorder is service.Recorder over audit.Record.
type recorder struct{ *services }

func (r *recorder) Record(ctx context.Context, e audit.Entry) error {
	e.Actor = r.actor
	return audit.Record(ctx, r.pool, e)
}

// auditExporter is service.AuditExporter over audit's export functions.
type auditExporter struct{ *recorder }

func (a *auditExporter) Append(ctx context.Context, e audit.Entry) (audit.Anchor, error) {
	e.Actor = a.actor
	return audit.Append(ctx, a.pool, e)
}

func (a *auditExporter) DefaultFormat(ctx context.Context, f audit.Filter) (audit.Format, error) {
	return audit.DefaultFormat(ctx, a.pool, f)
}

func (a *auditExporter) Export(ctx context.Context, w io.Writer, format audit.Format, f audit.Filter) (audit.ExportResult, error) {
	return audit.Export(ctx, a.pool, w, format, f)
}

func (a *auditExporter) ExportEvidence(ctx context.Context, w io.Writer, f audit.Filter, from ...int64) (audit.EvidenceResult, error) {
	return audit.ExportEvidence(ctx, a.pool, w, f, from...)
}

// auditSigner is service.AuditSigner over audit's checkpoints.
type auditSigner struct{ *services }

func (a *auditSigner) Sign(ctx context.Context, signerKey string) (audit.Checkpoint, error) {
	return audit.SignCheckpoint(ctx, a.pool, a.actor, signerKey)
}

func (a *auditSigner) SignEvery(ctx context.Context, signerKey string, interval time.Duration, report func(audit.Checkpoint, error)) {
	audit.CheckpointEvery(ctx, a.pool, a.actor, signerKey, interval, report)
}

// reconciler is service.Reconciler over reconcile.Audited.
type reconciler struct{ *services }

func (r *reconciler) Reconcile(ctx context.Context) (reconcile.Report, error) {
	return reconcile.Audited(ctx, r.pool, r.actor)
}

// migrator is service.Migrator over store.Migrate, recording what it applied.
type migrator struct{ *services }

func (m *migrator) Migrate(ctx context.Context, d store.Deployment) (store.MigrationResult, error) {
	res, err := store.MigrateDeployment(ctx, m.pool, d, registry.QueueSystems()...)
	if err != nil {
		return res, err
	}
	details := map[string]any{"applied": res.Applied, "version": res.Version}
	if sys := res.Systems; len(sys.Added) > 0 || len(sys.Changed) > 0 {
		details["queue_systems_added"], details["queue_systems_changed"] = sys.Added, sys.Changed
	}
	if res.Deployment.Named() {
		details["deployment"] = string(res.Deployment)
	}
	if res.Moved != nil {
		details["moved_to_deployment"] = res.Moved
	}
	if d := res.Definitions; len(d.Replaced) > 0 || len(d.Dropped) > 0 {
		details["definitions_replaced"], details["definitions_dropped"] = d.Replaced, d.Dropped
	}
	err = audit.Record(ctx, m.pool, audit.Entry{Actor: m.actor, Action: "schema.migrate", Details: details})
	return res, err
}

func (m *migrator) PlanDown(ctx context.Context, version int64) ([]store.Migration, error) {
	return store.PlanDown(ctx, m.pool, version)
}

// Downgrade records the downgrade before it runs: the Down sections may
// take the trail itself away.
func (m *migrator) Downgrade(ctx context.Context, version int64) (store.DowngradeResult, error) {
	plan, err := store.PlanDown(ctx, m.pool, version)
	if err != nil {
		return store.DowngradeResult{}, err
	}
	undo := make([]int64, len(plan))
	for i, p := range plan {
		undo[i] = p.Version
	}
	if err := audit.Record(ctx, m.pool, audit.Entry{Actor: m.actor, Action: "schema.migrate.down",
		Details: map[string]any{"to": version, "undo": undo}}); err != nil {
		return store.DowngradeResult{}, err
	}
	return store.MigrateDown(ctx, m.pool, version)
}
