package replay

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The reservations template (issue 32, part 2) is the policy for the
// reservation shape the seed articles describe and the reference worker
// keeps (internal/sim/worker): a table reservations (id, status, version,
// hold_until, expired_at) whose expiry job moves a hold from 'held' to
// 'expired' when its version still matches, and a table processed_jobs
// (idempotency_key, processed_at) recording each job key the worker
// handled. With it, a run skips a reservation that is no longer held at
// the version its job was for, watches each replayed job's reservation
// leave 'held' with its key recorded, and counts a key recorded before the
// replay as a conflict; and `dlq summary`, the terminal UI and the metrics
// count the holds still held past their deadline (issue 32, part 3). The
// queries run against the reservation database (`--outcome-url`, a
// read-only login) and name its schema.

// ReservationsTemplate is the name `policy set --template` knows.
const ReservationsTemplate = "reservations"

// reservationsOutcomeWindow is the template's outcome_window: the
// tolerance of a hold, how long after its confirm a replayed job has to
// expire its reservation before it counts as unsettled.
const reservationsOutcomeWindow = "5m"

// schemaName is a schema a template may name: an unquoted identifier.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// TemplateChanges are the policy changes of the template spec names,
// "reservations" or "reservations:SCHEMA" (default schema reservations),
// ready for SetPolicyWhy: a proposal, approved by a second admin as any.
func TemplateChanges(spec string) (map[string]any, error) {
	name, schema, named := strings.Cut(spec, ":")
	if name != ReservationsTemplate {
		return nil, fmt.Errorf("unknown policy template %q: the one template is %q (or %q:SCHEMA for another schema)",
			name, ReservationsTemplate, ReservationsTemplate)
	}
	if !named {
		schema = "reservations"
	}
	if !schemaName.MatchString(schema) {
		return nil, fmt.Errorf("invalid schema %q for template %s: use a lower-case identifier, e.g. reservations", schema, name)
	}
	return ParsePolicyChanges([]string{
		"eligibility_query=" + ReservationsEligibilityQuery(schema),
		"outcome_query=" + ReservationsOutcomeQuery(schema),
		"outcome_window=" + reservationsOutcomeWindow,
		"gap_query=" + ReservationsGapQuery(schema),
	})
}

// ReservationsEligibilityQuery is the template's eligibility query for the
// tables of schema: a reservation is eligible while it is held at the
// version its job was for (a job that names no version is for any). Time
// is the request's business, not this query's (`--not-before`, a hold not
// yet due): a hold not yet due waits, it is not skipped.
func ReservationsEligibilityQuery(schema string) string {
	s := pgx.Identifier{schema}.Sanitize()
	return `SELECT r.status = 'held' AND r.version = coalesce($3, r.version) AS eligible,
       CASE WHEN r.status <> 'held' THEN 'the reservation is ' || r.status || ', no longer held'
            WHEN r.version <> $3 THEN format('the reservation is at version %s, the job was for version %s', r.version, $3)
       END AS reason
  FROM ` + s + `.reservations r
 WHERE r.id = $1`
}

// ReservationsOutcomeQuery is the template's outcome query for the tables
// of schema: a reservation is terminal once the job's key was handled and
// it is no longer held, at the time it expired (or the key was handled,
// when another path moved it first); the transition is a duplicate when
// the key was recorded before the replay was published.
func ReservationsOutcomeQuery(schema string) string {
	s := pgx.Identifier{schema}.Sanitize()
	return `SELECT CASE WHEN r.status <> 'held' AND p.processed_at IS NOT NULL
            THEN coalesce(r.expired_at, p.processed_at) END AS terminal_at,
       coalesce(p.processed_at < $4, false) AS duplicate
  FROM ` + s + `.reservations r
  LEFT JOIN ` + s + `.processed_jobs p ON p.idempotency_key = $2
 WHERE r.id = $1`
}

// ReservationsGapQuery is the template's gap query for the tables of
// schema: the holds still held a minute or more past their deadline by the
// reservation database's clock, whether or not a dead letter speaks for
// them. A hold less late than that is normal, its job on its way (a busy
// system always has some a few seconds late), and counting it would make
// the count never zero: the paging alert subtracts the holds failed for
// good from it, which means nothing over a floor of jobs in flight. On a
// large table it wants an index on hold_until where status = 'held'.
func ReservationsGapQuery(schema string) string {
	s := pgx.Identifier{schema}.Sanitize()
	return `SELECT count(*) AS past_deadline, min(r.hold_until) AS oldest_deadline
  FROM ` + s + `.reservations r
 WHERE r.status = 'held' AND r.hold_until < now() - interval '1 minute'`
}
