package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// QueueSystem describes one queue system to the archive, as its driver
// knows it: the schema names no system, and reads what differs between
// them from the table queue_systems, which MigrateDeployment fills from
// the systems its caller gives it. A letter names its system (Name), and
// the archive refuses one whose queue is not named as its system names
// queues.
type QueueSystem struct {
	// Name is what letters carry as their system (dead_letters.source_system):
	// a lower-case identifier, such as "river".
	Name string
	// QueuePrefix begins every queue name of the system as letters carry
	// it ("river://", "arn:aws:sqs:"); empty for the one system whose
	// queues are named plainly (RabbitMQ's). No system's prefix may begin
	// another's: a queue's name says its system.
	QueuePrefix string
	// RetriesInPlace says that a replay retries the failed job where the
	// system keeps it, in the queue it was captured from, rather than
	// publishing a copy (a job store): its requests take no target, and
	// its items are spared the bound on publishes.
	RetriesInPlace bool
	// NamesConnectionInQueue says that a letter's queue name is
	// QueuePrefix, its connection's name, "/" and the queue there, so
	// that the queue's name alone says which connection it came through.
	NamesConnectionInQueue bool
	// DefaultConnection is the connection a letter captured without one
	// names (a capture of a release before letters named connections);
	// empty, and only empty, when NamesConnectionInQueue.
	DefaultConnection string
	// ConsumersUnseen says why the system shows nobody consuming a queue,
	// or not which handler each consumer runs (its driver's
	// Words.ConsumersUnseen), so that a replay's handler check has nothing
	// to verify: a request of its letters must then say
	// why the handler may take them again (--same-handler-ok), or is
	// refused when it is made (rule handler-unseen), with this sentence.
	// Empty for a system that shows its consumers. Printable, at most 300
	// characters. Unlike the fields above it may change while the archive
	// holds letters of the system: it is words, not how letters are named.
	ConsumersUnseen string
}

var (
	queueSystemName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
	queuePrefix     = regexp.MustCompile(`^[!-~]{0,64}$`)
	connectionName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
)

// maxConsumersUnseen bounds QueueSystem.ConsumersUnseen, in characters, as
// the constraint queue_systems_consumers_unseen_check does.
const maxConsumersUnseen = 300

// Validate refuses a description the archive cannot hold, saying what to
// write instead; queue_systems_register and the table's constraints hold
// the same rules.
func (s QueueSystem) Validate() error {
	switch {
	case !queueSystemName.MatchString(s.Name):
		return fmt.Errorf("queue system name %q: use lower-case letters, digits and \"_\", a letter first, at most 63", s.Name)
	case !queuePrefix.MatchString(s.QueuePrefix):
		return fmt.Errorf("queue system %s: queue prefix %q: printable ASCII without spaces, at most 64 characters", s.Name, s.QueuePrefix)
	case s.QueuePrefix == "" && (s.RetriesInPlace || s.NamesConnectionInQueue):
		return fmt.Errorf("queue system %s has no queue prefix, but a system whose jobs are retried in place, or whose queue names carry their connection, is told by its queue names' beginning: give it one (for instance %q)", s.Name, s.Name+"://")
	case s.NamesConnectionInQueue && s.DefaultConnection != "":
		return fmt.Errorf("queue system %s names its letters' connection in their queue names (%sCONNECTION/…), so it takes no default connection", s.Name, s.QueuePrefix)
	case !s.NamesConnectionInQueue && s.DefaultConnection == "":
		return fmt.Errorf("queue system %s needs a default connection: its queue names carry none, and a capture that names none must name one", s.Name)
	case s.DefaultConnection != "" && !connectionName.MatchString(s.DefaultConnection):
		return fmt.Errorf("queue system %s: default connection %q is no connection's name (letters, digits, \".\", \"_\" and \"-\", at most 63, a letter or digit first)", s.Name, s.DefaultConnection)
	case s.ConsumersUnseen != "" && (strings.TrimSpace(s.ConsumersUnseen) == "" || !utf8.ValidString(s.ConsumersUnseen) ||
		strings.ContainsFunc(s.ConsumersUnseen, unicode.IsControl) || utf8.RuneCountInString(s.ConsumersUnseen) > maxConsumersUnseen):
		return fmt.Errorf("queue system %s: why it shows no consumers (%.80q) is printed in refusals: write it as one sentence of printable characters, at most %d, or none for a system that shows its consumers",
			s.Name, s.ConsumersUnseen, maxConsumersUnseen)
	}
	return nil
}

// ValidateQueueSystems refuses systems that cannot be registered together:
// each must be valid, named once, and no prefix may begin another's (nor
// two be empty). The database checks them against the systems it already
// holds as well.
func ValidateQueueSystems(systems []QueueSystem) error {
	var errs []error
	for i, s := range systems {
		if err := s.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range systems[:i] {
			switch {
			case o.Name == s.Name:
				errs = append(errs, fmt.Errorf("queue system %s is registered twice: each driver registers its own", s.Name))
			case o.QueuePrefix == s.QueuePrefix ||
				o.QueuePrefix != "" && strings.HasPrefix(s.QueuePrefix, o.QueuePrefix) ||
				s.QueuePrefix != "" && strings.HasPrefix(o.QueuePrefix, s.QueuePrefix):
				errs = append(errs, fmt.Errorf("queue systems %s and %s: the queue names of %s begin %q and those of %s %q, so a queue's name would not say which system it is in",
					o.Name, s.Name, o.Name, o.QueuePrefix, s.Name, s.QueuePrefix))
			}
		}
	}
	return errors.Join(errs...)
}

// QueueSystemsResult says what registering the queue systems changed in
// queue_systems: the systems added, and those whose row changed (a new
// default connection or ConsumersUnseen, or anything of a system the
// archive holds no letter of), each sorted. Both are empty when the table
// already said what the systems given say.
type QueueSystemsResult struct {
	Added   []string `json:"added"`
	Changed []string `json:"changed"`
}

// registerQueueSystems writes systems to queue_systems in tx, through the
// schema's queue_systems_register, which refuses what would make the
// archive's letters mean something else.
func registerQueueSystems(ctx context.Context, tx pgx.Tx, systems []QueueSystem) (QueueSystemsResult, error) {
	res := QueueSystemsResult{Added: []string{}, Changed: []string{}}
	if len(systems) == 0 {
		return res, nil
	}
	n := len(systems)
	names, prefixes, defaults, unseen := make([]string, n), make([]string, n), make([]*string, n), make([]*string, n)
	inPlace, inQueue := make([]bool, n), make([]bool, n)
	for i, s := range systems {
		names[i], prefixes[i], inPlace[i], inQueue[i] = s.Name, s.QueuePrefix, s.RetriesInPlace, s.NamesConnectionInQueue
		if s.DefaultConnection != "" {
			defaults[i] = &s.DefaultConnection
		}
		if s.ConsumersUnseen != "" {
			unseen[i] = &s.ConsumersUnseen
		}
	}
	rows, err := tx.Query(ctx, `SELECT queue_system, change FROM `+Schema+`.queue_systems_register($1, $2, $3, $4, $5, $6)`,
		names, prefixes, inPlace, inQueue, defaults, unseen)
	if err != nil {
		return res, fmt.Errorf("migrate: register the queue systems: %w", err)
	}
	type change struct {
		QueueSystem string `db:"queue_system"`
		Change      string `db:"change"`
	}
	changes, err := pgx.CollectRows(rows, pgx.RowToStructByName[change])
	if err != nil {
		return res, fmt.Errorf("migrate: register the queue systems: %w", err)
	}
	for _, c := range changes {
		if c.Change == "added" {
			res.Added = append(res.Added, c.QueueSystem)
		} else {
			res.Changed = append(res.Changed, c.QueueSystem)
		}
	}
	slices.Sort(res.Added)
	slices.Sort(res.Changed)
	return res, nil
}

// QueueSystemNamed reads how the archive describes the system name, as
// the migrate registered it from its driver; ok is false for a system it
// does not know. Every group may read queue_systems; only the migrator
// writes it, so what a run decides from it (retry in place or publish)
// is the operator's release's, never a letter's.
func QueueSystemNamed(ctx context.Context, q Querier, name string) (s QueueSystem, ok bool, err error) {
	rows, err := q.Query(ctx, `SELECT name, queue_prefix, retries_in_place, names_connection_in_queue,
		coalesce(default_connection, '') AS default_connection, coalesce(consumers_unseen, '') AS consumers_unseen
		FROM `+Schema+`.queue_systems WHERE name = $1`, name)
	if err == nil {
		s, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[QueueSystem])
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return QueueSystem{}, false, nil
	}
	return s, err == nil, err
}
