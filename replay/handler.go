package replay

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/expiryctl/expiryctl/deadletter"
)

// The handler check (issue 14): a replay is pointless onto the worker that
// failed its letters. A worker that dead-letters a job names its version in
// the x-handler-version header, and a consumer advertises its own as the
// handler-version property of its AMQP connection. The request freezes the
// versions its cohort failed under; before a run starts, and at every check
// while it runs, the runner reads the consumers of the queues the cohort's
// targets route to. The database judges the start (replay_run_start, given
// what the runner saw: it cannot see the broker itself); the runner judges
// each later check the same way (HandlerVerdict) and halts the run when the
// rule becomes violated. A request made with SameHandlerOK skips both.

// Handler-check conditions: the rules replay_run_start names when it
// refuses a start, and the conditions a run halts on when a check finds
// them mid-run.
const (
	// ConditionSameHandler: every consumer of a target queue runs a handler
	// version the cohort failed under, or advertises none.
	ConditionSameHandler = "same-handler"
	// ConditionNoConsumer: a target queue has no consumer, or the targets
	// route to no queue.
	ConditionNoConsumer = "no-consumer"
	// ConditionHandlerUnverified: the consumers could not be read (the
	// live view did not answer), so nothing shows a new handler. A run
	// refuses to start on it; mid-run it interrupts the run instead, which
	// resumes, checked again, with `replay run`.
	ConditionHandlerUnverified = "handler-unverified"
)

// Target is where a replay publishes some of its letters.
type Target struct {
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routing_key"`
	// Letters counts the cohort's letters published there.
	Letters int `json:"letters"`
	// System is the queue system of the target; empty for the default
	// system's (deadletter.System.OrDefault), whose targets go through an
	// exchange. Another system's target is the queue its RoutingKey names.
	System deadletter.System `json:"system,omitempty"`
	// Connection is the name of the connection the cohort's letters came
	// from, which the runner's configuration resolves; empty for the
	// default connection of the target's system (the one a request of
	// before letters named theirs went through).
	Connection string `json:"connection,omitempty"`
}

func (t Target) String() string {
	switch {
	case t.System == "":
		// A broker's target: through an exchange, or the default one.
		return describeTarget(t.Exchange, t.RoutingKey)
	case strings.HasPrefix(t.RoutingKey, string(t.System)+"://"):
		// A job store's letters go back to their own queue, named
		// SYSTEM://CONNECTION/QUEUE (replay_target_of).
		return "the failed jobs, retried in place in " + strconv.Quote(t.RoutingKey)
	}
	return "queue " + strconv.Quote(t.RoutingKey)
}

// VersionCount is how many letters of a cohort one handler version failed.
// Version is "" for letters that name none (a worker that predates the
// header, or one the broker dead-lettered itself).
type VersionCount struct {
	Version string `json:"version"`
	Letters int    `json:"letters"`
}

// Consumer is one consumer of a queue, as the broker reports it.
type Consumer struct {
	Tag string `json:"tag"`
	// Connection names its AMQP connection (the broker's name for it).
	Connection string `json:"connection,omitempty"`
	// HandlerVersion is the handler-version its connection advertises; ""
	// when it advertises none.
	HandlerVersion string `json:"handler_version"`
}

// QueueConsumers is a queue a target routes to and its consumers now.
type QueueConsumers struct {
	Queue     string     `json:"queue"`
	Consumers []Consumer `json:"consumers"`
}

// Observation is what a runner saw of the consumers of a request's target
// queues, in the shape replay_run_start takes: Queues, or Unavailable
// saying why they could not be read.
type Observation struct {
	Queues      []QueueConsumers `json:"queues"`
	Unavailable string           `json:"unavailable,omitempty"`
}

// Consumers reads who consumes the queues a replay's targets route to. A
// driver whose system shows its consumers implements it over its live
// view. An error means the consumers could not be read (the live view is
// unreachable or refused); its text says why and how to fix it.
type Consumers interface {
	// TargetConsumers resolves each target to the queues it routes to (the
	// exchange's bindings) and returns each queue once with its consumers.
	// A target that routes to no queue adds none.
	TargetConsumers(ctx context.Context, targets []Target) ([]QueueConsumers, error)
}

// maxObservedConsumers bounds the consumers per queue an observation
// carries into the audit trail; the verdict needs one new version.
const maxObservedConsumers = 50

// observe reads the consumers of req's targets; the answer says why when
// they cannot be read.
func (r *Runner) observe(ctx context.Context, req Request) Observation {
	return observeConsumers(ctx, r.Consumers, req)
}

// observeConsumers reads who consumes req's targets. A system that shows
// nobody consuming a queue says why in its reader's error: the approver
// then sees the handler check unverified, and a run needs the request's
// --same-handler-ok.
func observeConsumers(ctx context.Context, c Consumers, req Request) Observation {
	if c == nil {
		return Observation{Unavailable: "this runner has no reader of the consumers of the request's queues"}
	}
	queues, err := c.TargetConsumers(ctx, req.Targets)
	if err != nil {
		return Observation{Unavailable: err.Error()}
	}
	for i := range queues {
		if len(queues[i].Consumers) > maxObservedConsumers {
			queues[i].Consumers = queues[i].Consumers[:maxObservedConsumers]
		}
	}
	return Observation{Queues: queues}
}

// HandlerVerdict judges an observation as replay_run_start does: the
// condition violated and why, or "" when some consumer of the target
// queues runs a handler version the cohort did not fail under. The
// consumers of all the target queues count together: a queue with none
// beside one with the fix (an audit tap bound to the same key) is no
// reason to refuse.
func HandlerVerdict(failedUnder []VersionCount, obs Observation) (condition, reason string) {
	if obs.Unavailable != "" {
		return ConditionHandlerUnverified, "cannot read the consumers of the target queues: " + obs.Unavailable
	}
	if len(obs.Queues) == 0 {
		return ConditionNoConsumer, "the targets route to no queue, so no consumer would take the replayed jobs"
	}
	failed := map[string]bool{}
	for _, v := range failedUnder {
		failed[v.Version] = true
	}
	var all []Consumer
	names := make([]string, len(obs.Queues))
	for i, q := range obs.Queues {
		all = append(all, q.Consumers...)
		names[i] = q.Queue
	}
	queues := strings.Join(names, ", ")
	if len(all) == 0 {
		return ConditionNoConsumer, fmt.Sprintf("queue %s has no consumer, so nothing would take the replayed jobs", queues)
	}
	if !slices.ContainsFunc(all, func(c Consumer) bool { return c.HandlerVersion != "" && !failed[c.HandlerVersion] }) {
		return ConditionSameHandler, fmt.Sprintf("every consumer of queue %s runs a handler version the cohort failed under, or advertises none (consumed now by %s; failed under %s)",
			queues, ConsumerVersions(all), FailedUnderText(failedUnder))
	}
	return "", ""
}

// handlerHalt is a mid-run check's verdict as a halt; nil when the rule
// holds or the request allows the same handler. An unreadable API is not a
// halt (see ConditionHandlerUnverified).
func handlerHalt(req Request, obs Observation) *HaltError {
	if req.Kind != KindReplay || req.SameHandlerOK || obs.Unavailable != "" {
		return nil
	}
	cond, reason := HandlerVerdict(req.FailedUnder, obs)
	if cond == "" {
		return nil
	}
	return &HaltError{RequestID: req.ID, Condition: cond, Reason: "a check during the run found that " + reason, consumers: &obs}
}

// ConsumerVersions lists the distinct handler versions of consumers, with
// how many consumers run each: "v2 ×2, (none advertised) ×1".
func ConsumerVersions(consumers []Consumer) string {
	n := map[string]int{}
	for _, c := range consumers {
		n[c.HandlerVersion]++
	}
	versions := make([]VersionCount, 0, len(n))
	for v, k := range n {
		versions = append(versions, VersionCount{Version: v, Letters: k})
	}
	sortVersions(versions)
	parts := make([]string, len(versions))
	for i, v := range versions {
		parts[i] = fmt.Sprintf("%s ×%d", versionName(v.Version, "(none advertised)"), v.Letters)
	}
	return strings.Join(parts, ", ")
}

// FailedUnderText lists a cohort's handler versions with their letters:
// "v1 (120 letters), (none named) (3 letters)".
func FailedUnderText(versions []VersionCount) string {
	if len(versions) == 0 {
		return "nothing"
	}
	parts := make([]string, len(versions))
	for i, v := range versions {
		letters := "letters"
		if v.Letters == 1 {
			letters = "letter"
		}
		parts[i] = fmt.Sprintf("%s (%d %s)", versionName(v.Version, "(none named)"), v.Letters, letters)
	}
	return strings.Join(parts, ", ")
}

func versionName(v, none string) string {
	if v == "" {
		return none
	}
	return v
}

// failedUnderFrom turns the frozen failed_under object into versions, most
// letters first.
func failedUnderFrom(m map[string]int) []VersionCount {
	out := make([]VersionCount, 0, len(m))
	for v, n := range m {
		out = append(out, VersionCount{Version: v, Letters: n})
	}
	sortVersions(out)
	return out
}

func sortVersions(vs []VersionCount) {
	slices.SortFunc(vs, func(a, b VersionCount) int {
		return cmp.Or(cmp.Compare(b.Letters, a.Letters), cmp.Compare(a.Version, b.Version))
	})
}

// maxHandlerMisses is how many checks in a row may fail to read the
// consumers before the run stops: the live view answering late once
// is no reason to stop, being gone for a few seconds is, since nothing then
// shows the handler is still the fixed one.
const maxHandlerMisses = 3

// checksHandler reports whether the run's checks read the consumers: a
// replay whose request did not allow the same handler, with a reader.
func (x *replayRun) checksHandler() bool {
	req := x.st.req
	return req.Kind == KindReplay && !req.SameHandlerOK && x.r.Consumers != nil
}

// handlerProbed judges a check's consumers: a halt when the rule became
// violated, an interruption when they could not be read maxHandlerMisses
// times in a row.
func (x *replayRun) handlerProbed(obs *Observation) *stopReason {
	if obs == nil {
		return nil
	}
	if obs.Unavailable != "" {
		if x.handlerMisses++; x.handlerMisses >= maxHandlerMisses {
			return &stopReason{err: fmt.Errorf("%s: the last %d checks could not read the consumers of the target queues (%s), so nothing shows the handler is still a new one; "+
				"the run stopped and resumes, checked again, with `expiryctl replay run %d`", ConditionHandlerUnverified, x.handlerMisses, obs.Unavailable, x.st.req.ID)}
		}
		return nil
	}
	x.handlerMisses = 0
	if h := handlerHalt(x.st.req, *obs); h != nil {
		return &stopReason{halt: h}
	}
	return nil
}

// HandlerCheck is the handler check of a replay request as an approver
// sees it: which versions failed the cohort, what consumes its targets now
// and what a run would make of that.
type HandlerCheck struct {
	// FailedUnder is Request.FailedUnder.
	FailedUnder []VersionCount `json:"failed_under"`
	// ConsumedNow is what consumes the targets now; nil when the request
	// is no longer open or no reader of the consumers was given.
	ConsumedNow *Observation `json:"consumed_now,omitempty"`
	// Condition and Reason are the verdict on ConsumedNow: the rule a run
	// would be refused or halted by, "" when it would pass. Allowed says
	// the request allows the same handler, so no rule applies.
	Condition string `json:"condition,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Allowed   bool   `json:"allowed"`
}

// PermanentLetter is a letter of a cohort that failed for good.
type PermanentLetter struct {
	DeadLetterID int64               `json:"dead_letter_id"`
	Category     deadletter.Category `json:"reason_category"`
	ErrorClass   string              `json:"error_class"`
	// LastError is the letter's last error text, cut to 300 bytes.
	LastError string `json:"last_error"`
}

// maxPermanentShown bounds the permanent letters a Detail lists.
const maxPermanentShown = 50

// handlerDetail fills in d's handler check and permanent letters.
func (s *Service) handlerDetail(ctx context.Context, t tables, d *Detail) error {
	d.Permanent = []PermanentLetter{}
	for _, c := range deadletter.PermanentCategories() {
		d.PermanentCount += d.Categories[c]
	}
	if d.PermanentCount > 0 {
		var err error
		if d.Permanent, err = t.ItemsPermanent(ctx, d.ID, maxPermanentShown); err != nil {
			return err
		}
	}
	if d.Kind != KindReplay {
		return nil
	}
	hc := &HandlerCheck{FailedUnder: d.FailedUnder, Allowed: d.SameHandlerOK}
	d.Handler = hc
	if !d.Open() {
		return nil
	}
	if s.Consumers == nil {
		hc.ConsumedNow = &Observation{Unavailable: "not read: no reader of the consumers was given"}
	} else {
		obs := observeConsumers(ctx, s.Consumers, d.Request)
		hc.ConsumedNow = &obs
	}
	hc.Condition, hc.Reason = HandlerVerdict(d.FailedUnder, *hc.ConsumedNow)
	return nil
}
