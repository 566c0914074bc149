package commands

import (
	"strings"

	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/view/linewrap"
)

// systemTitles names, in the registry's order, the systems whose driver
// keep holds, for help text: "A, B and C". Help that says
// how systems differ reads their drivers, so a new system is named where
// it belongs without editing the text.
func systemTitles(keep func(driver.Driver) bool) string {
	return systemList(keep, "and")
}

// systemList is systemTitles joined by conj ("and", "or").
func systemList(keep func(driver.Driver) bool, conj string) string {
	var titles []string
	for _, d := range registry.Drivers() {
		if keep(d) {
			titles = append(titles, d.Words().Title)
		}
	}
	switch len(titles) {
	case 0:
		return "no system"
	case 1:
		return titles[0]
	}
	return strings.Join(titles[:len(titles)-1], ", ") + " " + conj + " " + titles[len(titles)-1]
}

// anySystem keeps every system.
func anySystem(driver.Driver) bool { return true }

// copying is a system a replay sends copies to; inPlace one whose jobs
// a replay retries where they are.
func copying(d driver.Driver) bool { return !d.Traits().RetriesInPlace }
func inPlace(d driver.Driver) bool { return d.Traits().RetriesInPlace }

// evidenceOf keeps the systems that show e of their consumers.
func evidenceOf(e driver.Evidence) func(driver.Driver) bool {
	return func(d driver.Driver) bool { return d.Traits().Evidence == e }
}

// paragraphs wraps each paragraph at 80 columns and puts a blank line
// between them.
func paragraphs(ps ...string) string {
	for i, p := range ps {
		ps[i] = linewrap.Words(p, 80)
	}
	return strings.Join(ps, "\n\n")
}

// whereHelp is what `replay request --help` says of where each system's
// letters go.
func whereHelp() string {
	return paragraphs(append([]string{"Where a letter goes is its system's way. " + systemTitles(copying) + " letters are published again, " +
		"a copy with the same body, message id and idempotency key, to the queue they failed in; " +
		systemTitles(inPlace) + " jobs are retried in place, as the system's own retry would, and nothing is copied. " +
		"`replay show` lists every target before anyone approves."},
		systemsSay(func(w driver.Words) string { return w.Replay })...)...)
}

// handlerHelp is what `replay request --help` says of the handler check
// and of letters not worth retrying.
func handlerHelp() string {
	return paragraphs("A replay runs only onto a handler other than the one that failed its letters. "+
		systemTitles(evidenceOf(driver.VersionedConsumers))+"'s consumers say their version (handler-version on their "+
		"connections): `replay run` refuses to start, and halts a run, when no consumer of the target queues advertises "+
		"a version the cohort did not fail under (x-handler-version on the letters), when nothing consumes them, or when "+
		"the system cannot say. "+systemTitles(evidenceOf(driver.Consumers))+" shows its workers but not their versions, and "+
		systemTitles(evidenceOf(driver.NoConsumers))+" show no consumers at all: a request for their letters is refused "+
		"at once (rule handler-unseen) unless it says --same-handler-ok. --same-handler-ok \"why\" allows it (the "+
		"dependency recovered and the handler was never at fault); the approver sees the reason.",
		"Letters that failed for good (conflict, validation, malformed, not-found) are refused unless "+
			"--include-permanent says to replay them anyway; to decide \"never retry\", ask for a discard with "+
			"`expiryctl dlq discard`, which a second person approves.")
}

// runWhereHelp is what `replay run --help` says of what a replay sends.
func runWhereHelp() string {
	return paragraphs("A replay sends each frozen letter back where it came from, its system's way " +
		"(`replay request --help` says where). " + systemTitles(copying) + " letters are published with their " +
		"body, message id and idempotency key unchanged, their original headers minus the failure bookkeeping " +
		"(x-death, x-attempt-history, ...), and headers naming the request (x-replay-request, x-replay-count, " +
		"x-replayed-by, x-approved-by, x-replay-item). " + systemTitles(inPlace) + " jobs are retried in place, " +
		"their payload and key as the store kept them. A fresh-key request gives each job the key " +
		"\"<key>:replay:<request>\" instead.")
}

// planSystemsHelp is what `replay plan --help` says of the systems whose
// traffic cannot be measured.
func planSystemsHelp() string {
	rates := func(d driver.Driver) bool { return d.Traits().Rates }
	return paragraphs("The rates come from " + systemTitles(rates) + "'s live view. " + systemTitles(func(d driver.Driver) bool {
		return !rates(d)
	}) + " show no traffic of a queue: their plan has the archive's arrivals and the queue's depth, and lists the rest under unavailable, saying why.")
}

// rootHelp is the first paragraph of `expiryctl --help`.
func rootHelp() string {
	return paragraphs("expiryctl captures dead-lettered reservation-expiry jobs into PostgreSQL from the queue system " +
		"that holds them (" + systemList(anySystem, "or") + "), shows them grouped by reason with their attempt " +
		"history, and puts them back, or retries them where they are, only through a governed, audited replay.")
}

// dlqHelp is the first paragraph of `expiryctl dlq --help`.
func dlqHelp() string {
	return paragraphs("Capture dead-lettered jobs into PostgreSQL, from a " + systemList(copying, "or") +
		" dead-letter queue or the failed jobs of " + systemList(inPlace, "or") + ", and inspect them.")
}

// systemsSay is what each system's driver says, in the registry's order,
// where it says anything.
func systemsSay(say func(driver.Words) string) []string {
	var out []string
	for _, d := range registry.Drivers() {
		if s := say(d.Words()); s != "" {
			out = append(out, s)
		}
	}
	return out
}
