package commands

import (
	"fmt"
	"time"

	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
)

// runProgressLine is a run's progress on one line. While the run publishes
// it starts with the items done; while it waits (the canary window, the
// outcomes) it starts with what it waits for and the ETA, so that what
// changes fits an 80-column terminal, the rest being cut at its edge.
func runProgressLine(p replay.Progress) string {
	head := fmt.Sprintf("%s %d: ", p.Kind, p.RequestID)
	counts := fmt.Sprintf("%d/%d done (%d confirmed, %d skipped, %d failed)", p.Done, p.Total, p.Confirmed, p.Skipped, p.Failed)
	var rate, eta, extra string
	if p.Kind == replay.KindReplay {
		rate = fmt.Sprintf(", %d in flight, %.1f/s", p.InFlight, p.Rate)
		if p.ETA > 0 {
			eta = ", ETA " + phrase.Approximate(p.ETA)
		}
		if p.Outcomes != nil {
			extra += "; " + p.Outcomes.Line()
		}
		if p.PaceWhy != "" {
			extra += " · " + termsafe.EscapeLine(p.PaceWhy)
		}
	}
	var waiting string
	switch p.Phase {
	case "canary":
		return head + counts + rate + eta + extra + " — canary going out"
	case "canary-wait":
		waiting = fmt.Sprintf("canary out, watching %s more for re-dead letters", p.CanaryLeft.Round(time.Second))
	case "canary-outcomes":
		waiting = "canary out, waiting for its reservations to reach their terminal state"
	case "settling":
		waiting = "all published, waiting for the last reservations to reach their terminal state"
	case "watching":
		waiting = fmt.Sprintf("all confirmed, watching %s more for letters coming back", p.CanaryLeft.Round(time.Second))
	case "not-before":
		waiting = fmt.Sprintf("waiting until %s (not before: the request's --not-before, a Retry-After or a hold not yet due)",
			p.WaitUntil.UTC().Format(time.RFC3339))
	default:
		return head + counts + rate + eta + extra
	}
	return head + waiting + eta + " · " + counts + rate + extra
}

// failoverLine says which RabbitMQ node a run lost and which it goes on
// through, and what it sends again.
func failoverLine(request int64, f replay.Failover) string {
	from, to := orDash(f.From), orDash(f.To)
	again := "no item was in flight"
	if f.InFlight > 0 {
		again = phrase.Count(f.InFlight, "item", "items") + " in flight there, confirm unknown, go out again (the job's idempotency key absorbs a copy that did arrive)"
	}
	return fmt.Sprintf("replay request %d: lost RabbitMQ node %s (%s); failed over to %s in %s and goes on: %s",
		request, termsafe.EscapeLine(from), termsafe.EscapeLine(f.Cause), termsafe.EscapeLine(to),
		(time.Duration(f.Took * float64(time.Second))).Round(time.Millisecond), again)
}
