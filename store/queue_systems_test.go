package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/store"
)

// pgBoss is a sixth system as its driver would describe it: a job store
// that retries in place, whose queue names carry their connection, and
// whose workers leave no trace the handler check could read.
var pgBoss = store.QueueSystem{Name: "pgboss", QueuePrefix: "pgboss://", RetriesInPlace: true, NamesConnectionInQueue: true,
	ConsumersUnseen: "pg-boss shows no handler versions"}

// ingestOne has who capture one letter of system through ingest_letters,
// with raw SQL as any client could; connection "" leaves it to the
// archive. It returns the letter's id.
func ingestOne(ctx context.Context, who *pgxpool.Pool, system, queue, connection string) (int64, error) {
	var ids []int64
	err := who.QueryRow(ctx, `SELECT coalesce(array_agg(x), '{}') FROM expiryctl.ingest_letters('', $1::text,
		ARRAY[sha256(convert_to($2::text || $1::text || $3::text, 'UTF8'))], ARRAY['expire:' || $2::text || ':' || $1::text || ':v1'],
		ARRAY[NULL::text], ARRAY[NULL::text], ARRAY[NULL::text],
		ARRAY[NULL::bigint], ARRAY[NULL::timestamptz], ARRAY[$1::text], ARRAY[NULL::text], ARRAY[NULL::text], ARRAY[NULL::text], ARRAY['transient-exhausted'],
		ARRAY[NULL::text], ARRAY[NULL::text], ARRAY[1], ARRAY['[]'], ARRAY['{}'], ARRAY['application/json'],
		ARRAY[convert_to('{"reservation_id":"r-' || $2::text || '"}', 'UTF8')], ARRAY[now()],
		ARRAY[NULL::bigint], ARRAY[0], ARRAY[NULL::text], ARRAY[$2::text], ARRAY['{"job_id":"7"}'], ARRAY[nullif($3::text, '')]) AS x`,
		queue, system, connection).Scan(&ids)
	if err != nil {
		return 0, err
	}
	if len(ids) != 1 {
		return 0, fmt.Errorf("stored %d letters, want 1", len(ids))
	}
	return ids[0], nil
}

// refusedBy asserts that err is the database refusing a letter under the
// constraint named.
func refusedBy(t *testing.T, what string, err error, code, constraint string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != code || pgErr.ConstraintName != constraint {
		t.Errorf("%s: %v, want refused by %s (%s)", what, err, constraint, code)
	}
}

// TestASixthSystemNeedsNoSQL registers a system no file of the schema
// names, as a release with its driver would (MigrateDeployment): the
// archive then takes its letters, named as it names queues, and a replay
// treats them as a job store's, retried in place in their own queue. A
// letter of a system not registered, or named as another system names its
// queues, is refused, and the registration refuses a system that would
// make a queue's name say two systems, or change what the archive's
// letters mean.
func TestASixthSystemNeedsNoSQL(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	const queue = "pgboss://conn/expiry"

	target := func() (e, rk *string) {
		t.Helper()
		if err := rt.alice.Pool.QueryRow(ctx, `SELECT e, rk FROM expiryctl.replay_target_of(NULL, NULL, NULL, $1, NULL, NULL, false)`,
			queue).Scan(&e, &rk); err != nil {
			t.Fatal(err)
		}
		return e, rk
	}
	if _, rk := target(); rk != nil {
		t.Errorf("before pgboss is registered, its queue's target is %q, want none (a plain queue that is no .dlq)", *rk)
	}
	_, err := ingestOne(ctx, rt.ivan.Pool, "pgboss", queue, "")
	refusedBy(t, "a letter of pgboss before it is registered", err, "23503", "dead_letters_source_system_fkey")

	res, err := store.MigrateDeployment(ctx, rt.owner, "", pgBoss)
	if err != nil {
		t.Fatalf("register pgboss: %v", err)
	}
	if strings.Join(res.Systems.Added, ",") != "pgboss" || len(res.Systems.Changed) != 0 {
		t.Errorf("registering pgboss added %v and changed %v, want pgboss added", res.Systems.Added, res.Systems.Changed)
	}
	if res, err = store.MigrateDeployment(ctx, rt.owner, "", pgBoss); err != nil || len(res.Systems.Added)+len(res.Systems.Changed) != 0 {
		t.Errorf("registering pgboss again: %+v, %v; want nothing to do", res.Systems, err)
	}
	if _, err := store.Migrate(ctx, rt.owner); err != nil {
		t.Fatal(err)
	}
	var known bool
	if err := rt.audrey.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM expiryctl.queue_systems WHERE name = 'pgboss' AND retries_in_place)`).Scan(&known); err != nil || !known {
		t.Fatalf("after a migrate that registers no system, pgboss is registered: %v (%v), want it kept", known, err)
	}

	id, err := ingestOne(ctx, rt.ivan.Pool, "pgboss", queue, "")
	if err != nil {
		t.Fatalf("the ingester cannot capture a pgboss letter: %v", err)
	}
	var system, connection string
	if err := rt.owner.QueryRow(ctx, `SELECT source_system, connection FROM expiryctl.dead_letters WHERE id = $1`, id).Scan(&system, &connection); err != nil ||
		system != "pgboss" || connection != "conn" {
		t.Fatalf("stored system %q, connection %q (%v); want pgboss, and the connection its queue names, conn", system, connection, err)
	}
	if e, rk := target(); e == nil || rk == nil || *e != "" || *rk != queue {
		t.Errorf("pgboss's target is %v %v, want its own queue %s: a job store retries in place", e, rk, queue)
	}

	create := `SELECT request_id FROM expiryctl.replay_request_create('', 'replay', $1::jsonb, NULL, 0, $2, $3, 'INC-42',
		$5, $5, true, 'pg-boss shows no workers', false, $4, NULL, false, 'the test captures nothing')`
	ids := fmt.Sprintf(`{"ids": [%d]}`, id)
	refused(t, rt.alice.Pool, "target", create, ids, "", "reservation-expiry", false, false)
	refused(t, rt.alice.Pool, "target", create, ids, "reservations", "reservation.expire", false, false)
	refused(t, rt.alice.Pool, "fresh-key", create, ids, "", "", false, true)
	refused(t, rt.alice.Pool, "system", create, fmt.Sprintf(`{"ids": [%d, %d]}`, id, rt.letters[0]), "", "", false, false)
	var request int64
	if err := rt.alice.Pool.QueryRow(ctx, create, ids, "", "", false, false).Scan(&request); err != nil {
		t.Fatalf("a request to retry the pgboss job in place: %v", err)
	}
	var targets []map[string]any
	var raw []byte
	if err := rt.owner.QueryRow(ctx, `SELECT targets FROM expiryctl.replay_requests WHERE id = $1`, request).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &targets); err != nil || len(targets) != 1 || targets[0]["routing_key"] != queue ||
		targets[0]["exchange"] != "" || targets[0]["system"] != "pgboss" || targets[0]["connection"] != "conn" {
		t.Errorf("frozen targets %s (%v), want the job's own queue %s of system pgboss, connection conn", raw, err, queue)
	}

	for _, bad := range []struct{ system, queue, connection, constraint string }{
		{"pgboss", "river://conn/expiry", "", "dead_letters_system_names_queue"},
		{"pgboss", "reservation-expiry.dlq", "", "dead_letters_system_names_queue"},
		{"river", queue, "", "dead_letters_system_names_queue"},
		{"rabbitmq", queue, "", "dead_letters_system_names_queue"},
		{"sqs", queue, "", "dead_letters_system_names_queue"},
		{"pgboss", queue, "other", "dead_letters_connection_named"},
		{"pgboss", "pgboss://attacker.example:5432/expiry", "", "dead_letters_connection_named"},
	} {
		_, err := ingestOne(ctx, rt.ivan.Pool, bad.system, bad.queue, bad.connection)
		refusedBy(t, fmt.Sprintf("a %s letter of queue %q, connection %q", bad.system, bad.queue, bad.connection), err, "23514", bad.constraint)
	}
	_, err = ingestOne(ctx, rt.ivan.Pool, "kafka", "kafka://conn/expiry", "conn")
	refusedBy(t, "a letter of kafka, which no migrate registered", err, "23503", "dead_letters_source_system_fkey")

	// The registration's own refusals: in Go before anything is migrated,
	// and in the database against the systems it holds.
	for _, bad := range [][]store.QueueSystem{
		{{Name: "PgBoss", QueuePrefix: "pgboss://", RetriesInPlace: true, NamesConnectionInQueue: true}},
		{{Name: "plain", RetriesInPlace: true, NamesConnectionInQueue: true}},
		{{Name: "nodefault", QueuePrefix: "nodefault://"}},
		{{Name: "a", QueuePrefix: "x://", DefaultConnection: "a"}, {Name: "b", QueuePrefix: "x://b/", DefaultConnection: "b"}},
		{pgBoss, pgBoss},
		{{Name: "blank", QueuePrefix: "blank://", RetriesInPlace: true, NamesConnectionInQueue: true, ConsumersUnseen: " \t"}},
		{{Name: "ansi", QueuePrefix: "ansi://", RetriesInPlace: true, NamesConnectionInQueue: true, ConsumersUnseen: "no workers\x1b[2J"}},
		{{Name: "lines", QueuePrefix: "lines://", RetriesInPlace: true, NamesConnectionInQueue: true, ConsumersUnseen: "no workers\nrefused by rule none"}},
		{{Name: "long", QueuePrefix: "long://", RetriesInPlace: true, NamesConnectionInQueue: true, ConsumersUnseen: strings.Repeat("é", 301)}},
	} {
		if err := store.ValidateQueueSystems(bad); err == nil {
			t.Errorf("ValidateQueueSystems(%+v) = nil, want refused", bad)
		}
		if _, err := store.MigrateDeployment(ctx, rt.owner, "", bad...); err == nil {
			t.Errorf("MigrateDeployment registered %+v, want refused", bad)
		}
	}
	if _, err := ingestOne(ctx, rt.ivan.Pool, "river", "river://jobs/expiry", ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		why    string
		system store.QueueSystem
		says   string
	}{
		{"a prefix another system's begins", store.QueueSystem{Name: "riverish", QueuePrefix: "river://legacy/", DefaultConnection: "riverish"}, "river"},
		{"a prefix that begins another system's", store.QueueSystem{Name: "pg", QueuePrefix: "pg", DefaultConnection: "pg"}, "pgboss"},
		{"a prefix under which rabbitmq letters are archived", store.QueueSystem{Name: "legacy", QueuePrefix: "q.", DefaultConnection: "legacy"}, "q.dlq"},
		{"river's prefix changed while it has letters", store.QueueSystem{Name: "river", QueuePrefix: "riverqueue://", RetriesInPlace: true, NamesConnectionInQueue: true}, "river"},
		{"pgboss no longer retrying in place, with a letter", store.QueueSystem{Name: "pgboss", QueuePrefix: "pgboss://", NamesConnectionInQueue: true}, "pgboss"},
	} {
		if err := store.ValidateQueueSystems([]store.QueueSystem{c.system}); err != nil {
			t.Fatalf("%s: Go refuses %+v (%v), but only the database can", c.why, c.system, err)
		}
		_, err := store.MigrateDeployment(ctx, rt.owner, "", c.system)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: registering %+v: %v, want refused naming %s", c.why, c.system, err, c.says)
		}
	}
	// The database holds its rules for whoever calls it: the owner too.
	for _, sql := range []string{
		`SELECT * FROM expiryctl.queue_systems_register(ARRAY['bull'], ARRAY['bullmq://x/'], ARRAY[true], ARRAY[true], ARRAY[NULL::text], ARRAY[NULL::text])`,
		`SELECT * FROM expiryctl.queue_systems_register(ARRAY['ansi'], ARRAY['ansi://'], ARRAY[true], ARRAY[true], ARRAY[NULL::text], ARRAY[E'no workers\x1b[2J'])`,
		`SELECT * FROM expiryctl.queue_systems_register(ARRAY['long'], ARRAY['long://'], ARRAY[true], ARRAY[true], ARRAY[NULL::text], ARRAY[repeat('é', 301)])`,
		`SELECT * FROM expiryctl.queue_systems_register(ARRAY['blank'], ARRAY['blank://'], ARRAY[true], ARRAY[true], ARRAY[NULL::text], ARRAY[''])`,
		`SELECT * FROM expiryctl.queue_systems_register(ARRAY['short'], ARRAY['short://'], ARRAY[true], ARRAY[true], ARRAY[NULL::text], ARRAY[]::text[])`,
		`UPDATE expiryctl.queue_systems SET consumers_unseen = E'no workers\nrefused by rule none' WHERE name = 'river'`,
	} {
		if _, err := rt.owner.Exec(ctx, sql); err == nil {
			t.Errorf("the owner's raw SQL was taken: %s", sql)
		}
	}
	// A system without letters may change, and a default connection may.
	changed := store.QueueSystem{Name: "sqs", QueuePrefix: "arn:aws:sqs:", DefaultConnection: "aws",
		ConsumersUnseen: "SQS shows no consumers of a queue, nor their versions"}
	if res, err := store.MigrateDeployment(ctx, rt.owner, "", changed); err != nil || strings.Join(res.Systems.Changed, ",") != "sqs" {
		t.Errorf("a new default connection of sqs: %+v, %v; want sqs changed", res.Systems, err)
	}
	if _, err := ingestOne(ctx, rt.ivan.Pool, "sqs", "arn:aws:sqs:us-east-1:100010001000:expiry-dlq", ""); err != nil {
		t.Fatal(err)
	}
	if err := rt.owner.QueryRow(ctx, `SELECT connection FROM expiryctl.dead_letters WHERE source_system = 'sqs'`).Scan(&connection); err != nil || connection != "aws" {
		t.Errorf("an SQS letter captured without a connection names %q (%v), want the system's new default aws", connection, err)
	}
	// Why a system shows no consumers is words, not how its letters are
	// named: it may change while the archive holds them, and back to none.
	for _, unseen := range []string{"pg-boss 12 shows no handler versions", ""} {
		reworded := pgBoss
		reworded.ConsumersUnseen = unseen
		if res, err := store.MigrateDeployment(ctx, rt.owner, "", reworded); err != nil || strings.Join(res.Systems.Changed, ",") != "pgboss" {
			t.Errorf("pgboss, with letters, reworded to %q: %+v, %v; want pgboss changed", unseen, res.Systems, err)
		}
		s, known, err := store.QueueSystemNamed(ctx, rt.alice.Pool, "pgboss")
		if err != nil || !known || s != reworded {
			t.Errorf("the archive describes pgboss as %+v (%v, %v), want %+v", s, known, err, reworded)
		}
	}
}

// TestRedTeamQueueSystems: the systems are the owner's to register. An
// insider with a login of their own (an operator, an ingester, an
// auditor) reads them, but cannot add, change or remove one with raw
// SQL, nor call the function migrate registers them with; neither can a
// member of pg_write_all_data.
func TestRedTeamQueueSystems(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	wally := rt.db.Login(t, "wally", "expiryctl_auditor")
	if _, err := rt.db.Superuser(t).Exec(ctx, "GRANT pg_write_all_data TO "+pgx.Identifier{wally.Name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	writes := []string{
		`INSERT INTO expiryctl.queue_systems VALUES ('kafka', 'kafka://', true, true, NULL)`,
		`UPDATE expiryctl.queue_systems SET retries_in_place = true WHERE name = 'rabbitmq'`,
		`UPDATE expiryctl.queue_systems SET queue_prefix = 'nats://' WHERE name = 'river'`,
		`DELETE FROM expiryctl.queue_systems WHERE name = 'sqs'`,
		`TRUNCATE expiryctl.queue_systems CASCADE`,
		`UPDATE expiryctl.queue_systems SET consumers_unseen = NULL WHERE name = 'river'`,
		`SELECT * FROM expiryctl.queue_systems_register(ARRAY['kafka'], ARRAY['kafka://'], ARRAY[true], ARRAY[true], ARRAY[NULL::text], ARRAY[NULL::text])`,
		`SELECT * FROM expiryctl.queue_systems_register(ARRAY['river'], ARRAY['river://'], ARRAY[true], ARRAY[true], ARRAY[NULL::text], ARRAY[NULL::text])`,
	}
	for _, who := range []*struct {
		name string
		pool *pgxpool.Pool
	}{{"alice", rt.alice.Pool}, {"ivan", rt.ivan.Pool}, {"audrey", rt.audrey.Pool}, {"mallory", rt.mallory.Pool}} {
		var n int
		if err := who.pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.queue_systems`).Scan(&n); err != nil || n != 5 {
			t.Errorf("%s reads %d queue systems (%v), want the 5 seeded", who.name, n, err)
		}
		for _, sql := range writes {
			if _, err := who.pool.Exec(ctx, sql); !isPrivilegeError(err) {
				t.Errorf("%s: %s: %v, want refused for want of the privilege", who.name, sql, err)
			}
		}
	}
	conn, err := pgx.Connect(ctx, wally.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range writes {
		tag, err := conn.Exec(ctx, sql)
		if err == nil && tag.RowsAffected() != 0 || err != nil && !isPrivilegeError(err) {
			t.Errorf("wally (pg_write_all_data): %s: %v rows, %v; want refused or no row found", sql, tag.RowsAffected(), err)
		}
	}
	var rows string
	if err := rt.owner.QueryRow(ctx, `SELECT string_agg(format('%s %s %s %s %s %s', name, queue_prefix, retries_in_place, names_connection_in_queue,
		coalesce(default_connection, '-'), consumers_unseen IS NOT NULL), '; ' ORDER BY name) FROM expiryctl.queue_systems`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	const want = "bullmq bullmq:// t t - t; jobtable jobtable:// t t - t; rabbitmq  f f rabbitmq f; river river:// t t - t; sqs arn:aws:sqs: f f sqs t"
	if rows != want {
		t.Errorf("after the insiders' writes the systems are %q, want %q", rows, want)
	}
}
