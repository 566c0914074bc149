package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// versionTable records which migrations goose applied.
const versionTable = Schema + ".schema_version"

// migrationLockTable is the table whose row serialises `expiryctl migrate`
// runs across hosts (goose's table locker: a leased row, kept alive while
// the migrate runs). Until migration 00025 an advisory key did, which any
// login that could connect could hold to stall every migrate; the table is
// the owner's, and row security keeps everyone else from its row.
const migrationLockTable = Schema + ".schema_migrate_lock"

// migrationLockID is the lock row's id ("expiryctl" in ASCII, truncated to
// 63 bits).
const migrationLockID int64 = 0x6578706972796374

// ErrSchemaMissing means the database has no expiryctl schema yet.
var ErrSchemaMissing = errors.New("the expiryctl schema is missing: run `expiryctl migrate`")

// SchemaOutdatedError means the database is behind (or ahead of) this
// binary: its numbered migrations (Have, Want), or, at the same version,
// the functions and views it runs (Definitions).
type SchemaOutdatedError struct {
	Have, Want  int64
	Definitions bool
}

func (e *SchemaOutdatedError) Error() string {
	if e.Definitions {
		return fmt.Sprintf("the database schema is at version %d, but its functions are not this expiryctl's (another release migrated it, or a migrate failed part way): run `expiryctl migrate` with this release", e.Have)
	}
	if e.Have > e.Want {
		return fmt.Sprintf("the database schema is at version %d, newer than this expiryctl (%d): upgrade expiryctl", e.Have, e.Want)
	}
	return fmt.Sprintf("the database schema is at version %d but this expiryctl needs %d: run `expiryctl migrate`", e.Have, e.Want)
}

// MigrationResult says what one Migrate call changed.
type MigrationResult struct {
	// Applied are the numbered migrations applied, oldest first; Version
	// is the schema's version after them.
	Applied []int64
	Version int64
	// Definitions says which function and view files were applied.
	Definitions DefinitionsResult
	// Access says whether the database is closed to logins outside
	// expiryctl's groups (CloseDatabase).
	Access DatabaseAccess
	// Database, Server and Login say which database was migrated: its
	// name, the server's host:port, and the login that migrated it.
	Database, Server, Login string
	// Deployment is the deployment the schema serves; Moved says what
	// moving it from the unnamed deployment's groups to its own did, when
	// this run did it.
	Deployment Deployment
	Moved      *DeploymentMove
	// SharedWith are the cluster's other databases that admit this
	// deployment's groups: their people are this deployment's people.
	SharedWith []string
	// Systems says which of the queue systems given to MigrateDeployment
	// this run added to queue_systems, and which it changed.
	Systems QueueSystemsResult
}

// Migrate applies every embedded migration that the database at pool lacks,
// then the definition files whose form the database does not run yet
// (ApplyDefinitions), for the deployment the schema serves
// (ReadDeployment); MigrateDeployment names it, and registers queue
// systems, of which Migrate registers none (the archive keeps those it
// has: the migrations seed the five of the releases before 00042, and
// nothing deletes one). It is idempotent, and
// concurrent calls from several hosts are serialised (the numbered migrations by the leased row of
// schema_migrate_lock, the definitions by a lock on their table), so
// running it twice or from two places at once is safe. On an up-to-date
// database it changes nothing of the schema or its data: only the lock
// row is taken and given back.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (MigrationResult, error) {
	return MigrateDeployment(ctx, pool, "")
}

// MigrateDeployment is Migrate for the deployment named d, whose groups a
// DBA has made (`expiryctl access bootstrap OWNER --deployment NAME`): the
// migrations and definition files are rendered with its group names. A
// schema of the unnamed deployment is moved to d's groups (MoveDeployment);
// one of another named deployment is refused, since a deployment's name is
// fixed at install. d "" is the deployment the schema serves.
//
// systems are the queue systems whose letters the archive takes, one for
// each driver of the caller: once the schema is current, each is added to
// queue_systems or, where its row differs, the row is changed, under the
// lock that serialises migrates. No row is deleted, so a system a release
// no longer drives keeps the letters it has. Systems are checked before
// anything is migrated (ValidateQueueSystems), and again by the database
// against those it holds: a prefix that begins another system's, or under
// which the archive holds another system's queue, is refused, and so is a
// change of a system's prefix, its RetriesInPlace or its
// NamesConnectionInQueue while the archive holds letters of it.
func MigrateDeployment(ctx context.Context, pool *pgxpool.Pool, d Deployment, systems ...QueueSystem) (MigrationResult, error) {
	if err := ValidateQueueSystems(systems); err != nil {
		return MigrationResult{}, fmt.Errorf("migrate: %w", err)
	}
	current, err := ReadDeployment(ctx, pool)
	if err != nil {
		return MigrationResult{}, fmt.Errorf("migrate: %w", err)
	}
	switch {
	case d == "":
		d = current
	case current.Named() && current != d:
		return MigrationResult{}, fmt.Errorf("migrate: this database's schema serves the deployment %s, not %s: a deployment's name is fixed at install", current, d)
	}
	if err := checkGroupsExist(ctx, pool, d); err != nil {
		return MigrationResult{}, err
	}
	provider, closeDB, err := openProvider(ctx, pool, d)
	if err != nil {
		return MigrationResult{}, err
	}
	defer closeDB()
	results, err := provider.Up(ctx)
	if err != nil {
		return MigrationResult{}, fmt.Errorf("migrate: %w", err)
	}
	res := MigrationResult{Deployment: d}
	cfg := pool.Config().ConnConfig
	res.Server = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if err := pool.QueryRow(ctx, `SELECT current_database(), session_user`).Scan(&res.Database, &res.Login); err != nil {
		return res, fmt.Errorf("migrate: read the database's name: %w", err)
	}
	for _, r := range results {
		res.Applied = append(res.Applied, r.Source.Version)
	}
	res.Version, err = provider.GetDBVersion(ctx)
	if err != nil {
		return res, fmt.Errorf("migrate: read version: %w", err)
	}
	if res.Version > LatestVersion() {
		// A later release's functions are not this one's to replace.
		return res, &SchemaOutdatedError{Have: res.Version, Want: LatestVersion()}
	}
	if res.Definitions, err = applyDefinitions(ctx, pool, renderedFS{definitionFiles, d}); err != nil {
		return res, err
	}
	if d.Named() {
		if res.Moved, err = MoveDeployment(ctx, pool, d); err != nil {
			return res, err
		}
	}
	// Under the definitions' lock: two migrates granting on the database
	// at once would have one fail ("tuple concurrently updated"), and two
	// registering systems would each check against the table without the
	// other's.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE `+definitionsTable+` IN EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("migrate: lock %s: %w", definitionsTable, err)
		}
		if res.Systems, err = registerQueueSystems(ctx, tx, systems); err != nil {
			return err
		}
		res.Access, err = CloseDatabase(ctx, tx, d)
		return err
	})
	if err != nil {
		return res, err
	}
	res.SharedWith, err = DatabasesSharing(ctx, pool, d)
	return res, err
}

// DatabasesSharing names the cluster's other databases whose privileges
// admit one of d's groups (CONNECT, granted by the migrate that closed
// them): a member of d's groups there is a member here, so on a cluster of
// several deployments each needs a name of its own.
func DatabasesSharing(ctx context.Context, q Querier, d Deployment) ([]string, error) {
	var names []string
	err := q.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT db.datname::text ORDER BY db.datname::text), '{}')
		FROM pg_database db, aclexplode(db.datacl) a JOIN pg_roles r ON r.oid = a.grantee
		WHERE db.datname <> current_database() AND a.privilege_type = 'CONNECT' AND r.rolname = ANY ($1)`, d.Groups()).Scan(&names)
	if err != nil {
		return nil, fmt.Errorf("migrate: read which databases admit the deployment's groups: %w", err)
	}
	return names, nil
}

// checkGroupsExist refuses to migrate for a deployment whose groups the
// DBA has not made: the owner, without CREATEROLE, could not make them, and
// the first migration would fail with less to go on.
func checkGroupsExist(ctx context.Context, pool *pgxpool.Pool, d Deployment) error {
	var missing []string
	if err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(g ORDER BY g), '{}') FROM unnest($1::text[]) g
		WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = g)`, d.Groups()).Scan(&missing); err != nil {
		return fmt.Errorf("migrate: look for the deployment's groups: %w", err)
	}
	if len(missing) == 0 {
		return nil
	}
	var super, createRole bool
	if err := pool.QueryRow(ctx, `SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = session_user`).Scan(&super, &createRole); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if !d.Named() && (super || createRole) {
		// The first migration makes the unnamed deployment's groups, as
		// it always did, for a login that may.
		return nil
	}
	flag := ""
	if d.Named() {
		flag = " --deployment " + string(d)
	}
	return fmt.Errorf("migrate: the deployment's groups %s do not exist: a DBA (a superuser or a CREATEROLE login) makes them once with `expiryctl access bootstrap OWNER%s`", strings.Join(missing, ", "), flag)
}

func createSchema(ctx context.Context, pool *pgxpool.Pool) error {
	// CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the
	// schema exists, which an owner of the schema that does not own the
	// database lacks: so look first.
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, Schema).Scan(&exists); err != nil {
		return fmt.Errorf("migrate: look for schema %s: %w", Schema, err)
	}
	if exists {
		return nil
	}
	// Two hosts may race on CREATE SCHEMA IF NOT EXISTS; the loser's duplicate
	// error means the schema is there, which is all that is wanted.
	_, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+Schema)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P06" || pgErr.Code == "23505") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrate: create schema %s: %w", Schema, err)
	}
	return nil
}

// openProvider creates the schema if need be and returns a goose provider
// over pool, with the function that releases it.
func openProvider(ctx context.Context, pool *pgxpool.Pool, d Deployment) (*goose.Provider, func(), error) {
	if err := createSchema(ctx, pool); err != nil {
		return nil, nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	provider, err := newProvider(db, d)
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return provider, func() { _ = db.Close() }, nil
}

func newProvider(db *sql.DB, d Deployment) (*goose.Provider, error) {
	// A migrate waits up to five minutes for another, probing twice a
	// second; a holder that died frees the row when its lease runs out.
	locker, err := lock.NewPostgresTableLocker(lock.WithTableName(migrationLockTable), lock.WithTableLockID(migrationLockID),
		lock.WithTableLeaseDuration(30*time.Second), lock.WithTableHeartbeatInterval(5*time.Second),
		lock.WithTableLockTimeout(500*time.Millisecond, 600))
	if err != nil {
		return nil, err
	}
	versionStore, err := database.NewStore(database.DialectPostgres, versionTable)
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	return goose.NewProvider("", db, renderedFS{sub, d}, goose.WithStore(versionStore), goose.WithLocker(locker), goose.WithDisableGlobalRegistry(true))
}

// LatestVersion is the newest migration embedded in this binary.
func LatestVersion() int64 {
	entries, _ := fs.Glob(migrationFiles, "migrations/*.sql")
	var latest int64
	for _, name := range entries {
		var v int64
		if _, err := fmt.Sscanf(name[len("migrations/"):], "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// CheckSchema returns nil when the database's schema is exactly the version
// this binary was built for and runs this binary's definition files,
// ErrSchemaMissing when it has none, and a *SchemaOutdatedError otherwise.
// It costs one query when the schema is current.
func CheckSchema(ctx context.Context, q Querier) error {
	var have *int64
	var digest *string
	var holders []string
	err := q.QueryRow(ctx, `SELECT (SELECT max(version_id) FROM `+versionTable+` WHERE is_applied),
		(`+digestOfRecordedDefinitions+`), `+deploymentGroupsOfSchema).Scan(&have, &digest, &holders)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		// No definitions table: a schema from before 00021, or none.
		err = q.QueryRow(ctx, `SELECT CASE WHEN to_regclass($1) IS NULL THEN NULL
			ELSE (SELECT max(version_id) FROM `+versionTable+` WHERE is_applied) END`, versionTable).Scan(&have)
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
			return ErrSchemaMissing
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrSchemaMissing
	}
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if have == nil {
		return ErrSchemaMissing
	}
	if want := LatestVersion(); *have != want {
		return &SchemaOutdatedError{Have: *have, Want: want}
	}
	if digest == nil || *digest != embeddedDefinitionsDigest(deploymentOf(holders)) {
		return &SchemaOutdatedError{Have: *have, Want: *have, Definitions: true}
	}
	return nil
}

// embeddedDefinitionsDigest is definitionsDigest of this binary's files as
// rendered for d; a process serves one deployment, or a test a few.
func embeddedDefinitionsDigest(d Deployment) string {
	if sum, ok := renderedDigests.Load(d); ok {
		return sum.(string)
	}
	defs, err := readDefinitions(renderedFS{definitionFiles, d})
	if err != nil {
		return "unreadable: " + err.Error()
	}
	sum := definitionsDigest(defs)
	renderedDigests.Store(d, sum)
	return sum
}

var renderedDigests sync.Map

// MigrationsDigest is a hex sha256 over the embedded migration and
// definition files, so that a test template built from other files is not
// mistaken for a current one.
func MigrationsDigest() string {
	h := sha256.New()
	entries, _ := fs.Glob(migrationFiles, "migrations/*.sql")
	for _, name := range entries {
		b, _ := migrationFiles.ReadFile(name)
		h.Write([]byte(name))
		h.Write(b)
	}
	h.Write([]byte(embeddedDefinitionsDigest("")))
	return hex.EncodeToString(h.Sum(nil))
}

// Migrations steps one database up and down through the embedded
// migrations over one provider: MigrateDown takes a database down with it,
// and a test of every version does not reconnect for each step. It runs
// the numbered migrations alone; ApplyDefinitions is Migrate's.
type Migrations struct {
	provider *goose.Provider
	close    func()
}

// OpenMigrations returns the migrations of the database at pool; Close
// releases them.
func OpenMigrations(ctx context.Context, pool *pgxpool.Pool) (*Migrations, error) {
	d, err := ReadDeployment(ctx, pool)
	if err != nil {
		return nil, err
	}
	provider, closeDB, err := openProvider(ctx, pool, d)
	if err != nil {
		return nil, err
	}
	return &Migrations{provider: provider, close: closeDB}, nil
}

// Versions are the embedded migrations' versions, oldest first.
func (m *Migrations) Versions() []int64 {
	var versions []int64
	for _, s := range m.provider.ListSources() {
		versions = append(versions, s.Version)
	}
	return versions
}

// UpTo applies the migrations the database lacks up to and including version.
func (m *Migrations) UpTo(ctx context.Context, version int64) error {
	if _, err := m.provider.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrate up to %d: %w", version, err)
	}
	return nil
}

// DownTo rolls back every applied migration newer than version.
func (m *Migrations) DownTo(ctx context.Context, version int64) error {
	if _, err := m.provider.DownTo(ctx, version); err != nil {
		return fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return nil
}

// Close releases the connection the migrations hold.
func (m *Migrations) Close() { m.close() }
