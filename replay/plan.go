package replay

import (
	"context"
	"fmt"
	"math"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
)

// PlanOptions says what Service.Plan measures and what it is told. A nil
// figure is measured; a set one replaces the measurement (and says so).
type PlanOptions struct {
	// WorkQueue is the queue whose consumers the plan reads; empty means
	// the first of the queues the cohort's replay fills.
	WorkQueue string
	// ArrivalRate is R, jobs arriving per second.
	ArrivalRate *float64
	// FailureFraction is p, the share of attempts that fail transiently.
	FailureFraction *float64
	// Retries is n, the further attempts a job gets after its first.
	Retries *int
}

// Plan sizes a replay's rate against the consumers' headroom before it
// runs: the live load the consumers are offered, what they ack, and the
// replay rate that keeps the two together under the ack rate.
//
// How each figure is found, when not given:
//
//   - arrival_rate (R): the Flow's publish rate into the work queue,
//     which counts what clients publish (producers, and a replay while it
//     runs) and not retries coming back from the retry queues, since the
//     broker does not count a dead-lettered arrival as a publish.
//     Without a Flow, the archive's letters dead-lettered per second over
//     the last 5 minutes: a lower bound, since it counts only jobs that
//     died.
//   - failure_fraction (p): the publish rate into the work queue's retry
//     queues over its deliver rate: the share of attempts rescheduled. It
//     is unavailable without a Flow, without deliveries, or without retry
//     queues (a topology that retries by rejecting through a dead-letter
//     exchange shows no publishes there).
//   - attempts (n): the most attempts a letter of the cohort went through,
//     less the first: a letter that exhausted its budget spent all of it.
//   - ack_rate: the consumers' acknowledgements on the work queue, which
//     a worker sends for every finished attempt. It is the capacity the
//     consumers showed, a lower bound of what they could do.
//
// The bounds are of the live load: upper_bound = R·(1+n), planning_bound =
// R·(1−p^(n+1))/(1−p). The suggested rate x is the largest, at most the
// request's ceiling, with (R + x)·amplification ≤ ack_rate, where the
// amplification is (1−p^(n+1))/(1−p), or 1+n when p is unknown.
type Plan struct {
	RequestID int64   `json:"request_id"`
	Status    Status  `json:"status"`
	Ceiling   float64 `json:"ceiling"`
	// WorkQueue is the queue measured; "" when none is known.
	WorkQueue string `json:"work_queue"`
	// TargetQueues are the queues the cohort's replay fills.
	TargetQueues []string `json:"target_queues"`

	ArrivalRate       *float64 `json:"arrival_rate"`
	ArrivalRateSource string   `json:"arrival_rate_source,omitempty"`
	FailureFraction   *float64 `json:"failure_fraction"`
	FailureSource     string   `json:"failure_fraction_source,omitempty"`
	Attempts          int      `json:"attempts"`
	AttemptsSource    string   `json:"attempts_source"`
	// Amplification is the attempts per job the suggestion plans for.
	Amplification float64  `json:"amplification"`
	UpperBound    *float64 `json:"upper_bound"`
	PlanningBound *float64 `json:"planning_bound"`
	AckRate       *float64 `json:"ack_rate"`
	Consumers     *int     `json:"consumers"`
	Ready         *int64   `json:"ready"`
	SuggestedRate *float64 `json:"suggested_rate"`
	// LimitedBy is what bounds the suggestion (LimitedByHeadroom,
	// LimitedByCeiling, LimitedByNoHeadroom).
	LimitedBy string `json:"limited_by,omitempty"`
	// The offered load, live and replayed, at the suggested rate.
	SuggestedUpperBound    *float64 `json:"suggested_upper_bound"`
	SuggestedPlanningBound *float64 `json:"suggested_planning_bound"`
	// Unavailable says, figure by figure, what could not be measured and why.
	Unavailable []string `json:"unavailable"`
}

// Plan measures request id's recovery traffic (see Plan) with flow, which
// may be nil when nothing can measure it, and records replay.plan. A
// discard publishes nothing and has no plan.
func (s *Service) Plan(ctx context.Context, id int64, flow Flow, opts PlanOptions) (Plan, error) {
	p, err := s.plan(ctx, id, flow, opts)
	if err != nil {
		s.recordRefusal(ctx, "replay.plan", requestTarget(id), err, map[string]any{})
		return Plan{}, err
	}
	return p, audit.Record(ctx, s.Pool, audit.Entry{Actor: s.Actor, Action: "replay.plan", Target: requestTarget(id),
		Details: map[string]any{"work_queue": p.WorkQueue, "arrival_rate": p.ArrivalRate, "failure_fraction": p.FailureFraction,
			"attempts": p.Attempts, "ack_rate": p.AckRate, "suggested_rate": p.SuggestedRate, "ceiling": p.Ceiling}})
}

func (s *Service) plan(ctx context.Context, id int64, flow Flow, opts PlanOptions) (Plan, error) {
	t := s.tables()
	req, err := t.RequestGet(ctx, id)
	if err != nil {
		return Plan{}, err
	}
	if req.Kind != KindReplay {
		return Plan{}, fmt.Errorf("replay request %d is a %s: it publishes nothing, so there is no rate to plan", id, req.Kind)
	}
	maxAttempts, queues, err := t.ItemsPlanInputs(ctx, req)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{RequestID: id, Status: req.Status, Ceiling: req.Rate, TargetQueues: queues, Unavailable: []string{}}
	p.WorkQueue = opts.WorkQueue
	if p.WorkQueue == "" && len(queues) > 0 {
		p.WorkQueue = queues[0]
	}
	s.planAttempts(&p, maxAttempts, opts)
	var live *QueueFlow
	switch {
	case flow == nil:
		p.Unavailable = append(p.Unavailable, "live view: not configured")
	case p.WorkQueue == "":
		p.Unavailable = append(p.Unavailable, "work queue: the cohort's letters name no queue and the request no routing key: pass --work-queue")
	default:
		f, err := flow.QueueFlow(ctx, p.WorkQueue)
		if err != nil {
			return Plan{}, err
		}
		p.WorkQueue = f.Queue
		if f.Unavailable != "" {
			p.Unavailable = append(p.Unavailable, "live view: "+f.Unavailable)
		} else {
			live = &f
		}
	}
	if err := s.planArrivals(ctx, &p, live, opts); err != nil {
		return Plan{}, err
	}
	planFailures(&p, live, opts)
	planHeadroom(&p, live)
	return p, nil
}

// planAttempts sets n.
func (s *Service) planAttempts(p *Plan, maxAttempts int, opts PlanOptions) {
	switch {
	case opts.Retries != nil:
		p.Attempts, p.AttemptsSource = max(*opts.Retries, 0), "given (--retries)"
	case maxAttempts > 0:
		p.Attempts = maxAttempts - 1
		p.AttemptsSource = fmt.Sprintf("cohort: the most attempts a letter went through (%d), less the first", maxAttempts)
	default:
		p.AttemptsSource = "unknown: planning with none"
		p.Unavailable = append(p.Unavailable, "attempts: no letter of the cohort records its attempts: pass --retries")
	}
}

// planArrivals sets R: given, from the work queue's publish rate, or from
// the archive's recent arrivals.
func (s *Service) planArrivals(ctx context.Context, p *Plan, live *QueueFlow, opts PlanOptions) error {
	switch {
	case opts.ArrivalRate != nil:
		p.ArrivalRate, p.ArrivalRateSource = known(*opts.ArrivalRate), "given (--arrival-rate)"
	case live != nil:
		p.ArrivalRate = known(live.PublishRate)
		p.ArrivalRateSource = "management: publish rate into " + live.Queue
		if p.Status == StatusRunning {
			p.ArrivalRateSource += " (includes this request's own replay, which is running)"
		}
	default:
		w, err := deadletter.RecentArrivals(ctx, s.Pool)
		if err != nil {
			return err
		}
		p.ArrivalRate = known(w.PerMinute / 60)
		p.ArrivalRateSource = "archive: letters dead-lettered per second over the last 5 minutes (a lower bound: only the jobs that died)"
	}
	return nil
}

// planFailures sets p: given, or the retry queues' publishes over the work
// queue's deliveries.
func planFailures(p *Plan, live *QueueFlow, opts PlanOptions) {
	switch {
	case opts.FailureFraction != nil:
		p.FailureFraction, p.FailureSource = known(math.Min(math.Max(*opts.FailureFraction, 0), 1)), "given (--failure-fraction)"
	case live == nil:
		p.Unavailable = append(p.Unavailable, "failure_fraction: needs the queue's measured traffic: pass --failure-fraction")
	case live.RetryQueues == 0:
		p.Unavailable = append(p.Unavailable, fmt.Sprintf("failure_fraction: %s has no retry queues (%s.retry.<ms>) to count retries in: pass --failure-fraction",
			live.Queue, live.Queue))
	case live.DeliverRate <= 0:
		p.Unavailable = append(p.Unavailable, fmt.Sprintf("failure_fraction: nothing was delivered from %s in the last sampling interval: pass --failure-fraction", live.Queue))
	default:
		p.FailureFraction = known(math.Min(live.RetryPublishRate/live.DeliverRate, 1))
		p.FailureSource = fmt.Sprintf("management: publishes into %d retry queues of %s over its deliveries", live.RetryQueues, live.Queue)
	}
}

// planHeadroom sets the bounds, the ack rate and the suggestion.
func planHeadroom(p *Plan, live *QueueFlow) {
	p.Amplification = float64(1 + p.Attempts)
	if p.FailureFraction != nil {
		p.Amplification = Amplification(*p.FailureFraction, p.Attempts)
	}
	if p.ArrivalRate != nil {
		p.UpperBound = known(UpperBound(*p.ArrivalRate, p.Attempts))
		if p.FailureFraction != nil {
			p.PlanningBound = known(PlanningBound(*p.ArrivalRate, *p.FailureFraction, p.Attempts))
		}
	}
	if live == nil {
		p.Unavailable = append(p.Unavailable, "ack_rate: needs the queue's measured traffic", "suggested_rate: needs the consumers' ack rate")
		return
	}
	p.AckRate, p.Consumers, p.Ready = known(live.AckRate), known(live.Consumers), known(live.Ready)
	switch {
	case live.Consumers > 0 && live.AckRate <= 0 && live.Ready == 0:
		// Idle consumers ack nothing, which says nothing of what they can do.
		p.Unavailable = append(p.Unavailable, fmt.Sprintf(
			"suggested_rate: the %d consumers of %s are idle (no acks, nothing ready), so their capacity is unknown: rely on the canary and the run's pacing",
			live.Consumers, live.Queue))
		return
	case live.Consumers == 0:
		p.Unavailable = append(p.Unavailable, fmt.Sprintf(
			"suggested_rate: nothing consumes %s, so nothing would process a replay (a run's handler check refuses to start with no consumer): start its workers first",
			live.Queue))
		return
	case live.AckRate <= 0 && live.Ready > 0:
		p.Unavailable = append(p.Unavailable, fmt.Sprintf(
			"suggested_rate: the %d consumers of %s acked nothing while %d messages waited: they are stuck or failing, and show no capacity at all: find out why before replaying",
			live.Consumers, live.Queue, live.Ready))
		return
	case p.ArrivalRate == nil:
		return
	}
	rate, by := SuggestRate(*p.ArrivalRate, p.Amplification, live.AckRate, p.Ceiling)
	p.SuggestedRate, p.LimitedBy = known(rate), by
	p.SuggestedUpperBound = known(UpperBound(*p.ArrivalRate+rate, p.Attempts))
	p.SuggestedPlanningBound = known((*p.ArrivalRate + rate) * p.Amplification)
	if p.FailureFraction == nil {
		p.Unavailable = append(p.Unavailable, "planning_bound: needs failure_fraction; the suggestion plans for the upper bound instead")
	}
}

// Summary is the plan in one sentence for people: requested against
// suggested, and where a run of it starts (StartingPace).
func (p Plan) Summary() string {
	start, _ := p.StartingPace()
	if p.SuggestedRate == nil {
		return fmt.Sprintf("no suggestion: nothing measured shows what the consumers can take (see unavailable above), so the requested %g/s stands; "+
			"a run starts there and slows down if the target queue grows", p.Ceiling)
	}
	switch p.LimitedBy {
	case LimitedByCeiling:
		return fmt.Sprintf("requested %g/s fits the headroom: a run starts there", p.Ceiling)
	case LimitedByNoHeadroom:
		return fmt.Sprintf("requested %g/s against suggested 0/s: the live load alone offers the consumers of %s all they ack (%.2f/s); "+
			"a run starts at its floor %g/s and speeds up only as they catch up: wait for the load to fall, or add consumers",
			p.Ceiling, p.WorkQueue, derefOr(p.AckRate, 0), start)
	}
	return fmt.Sprintf("requested %g/s against suggested %.2f/s: more would offer the consumers more than they ack; a run starts at %g/s and paces from there",
		p.Ceiling, *p.SuggestedRate, start)
}

// StartingPace is the rate a run of the request starts at: the plan's
// suggestion when it is below the ceiling (never below the pacer's floor,
// which keeps a run from stalling), else the ceiling; why says which.
func (p Plan) StartingPace() (rate float64, why string) {
	if p.SuggestedRate == nil || *p.SuggestedRate >= p.Ceiling {
		return p.Ceiling, ""
	}
	floor := paceFloor(p.Ceiling)
	if *p.SuggestedRate < floor {
		return floor, fmt.Sprintf("starting at the floor %g/s: the plan finds no headroom on %s (suggested %.2f/s)", floor, p.WorkQueue, *p.SuggestedRate)
	}
	return *p.SuggestedRate, fmt.Sprintf("starting at the plan's suggested %.2f/s, under the ceiling %g/s: the headroom %s shows", *p.SuggestedRate, p.Ceiling, p.WorkQueue)
}

func derefOr(v *float64, or float64) float64 {
	if v == nil {
		return or
	}
	return *v
}

// known is a figure that was measured or given.
func known[T any](v T) *T { return &v }
