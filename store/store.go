package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/dsn"
)

// DefaultURL is the database expiryctl reaches when neither --database-url nor
// EXPIRYCTL_DATABASE_URL is set: the local cluster that scripts/services.sh
// prepares.
const DefaultURL = "postgres://root@127.0.0.1:5432/expiryctl?sslmode=disable"

// Schema is the PostgreSQL schema that holds every expiryctl table.
const Schema = "expiryctl"

// BuildSetting is the session setting through which a client names its
// build to the database, for the audit rows it writes (Options.Build).
const BuildSetting = "expiryctl.build"

func rootCause(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Message
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		if inner := errors.Unwrap(connErr); inner != nil {
			err = inner
		}
	}
	// pgconn joins one error per attempt (with and without TLS, per address);
	// the same line twice tells the operator nothing more.
	var lines []string
	seen := map[string]bool{}
	for _, line := range strings.Split(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" && !seen[line] {
			seen[line] = true
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "; ")
}

// Open connects a pool to the database at url and checks that it answers.
// It sets no timeouts beyond the connect timeout: it is for tests,
// benchmarks and tools; the commands connect with OpenWith.
// It fails with a *ConnectError when the server cannot be reached.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return OpenWith(ctx, url, Options{})
}

// OpenWith is Open with opts: a statement on a connection of the pool that
// gets no answer within opts.Timeout fails with a *NotAnsweringError.
func OpenWith(ctx context.Context, url string, opts Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, dsn.Invalid("database", url, parseFailure(url, err),
			"postgres://USER@HOST:5432/DATABASE (or key=value pairs: host=HOST user=USER dbname=DATABASE)")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "expiryctl"
	if opts.Build != "" {
		cfg.ConnConfig.RuntimeParams[BuildSetting] = opts.Build
	}
	applyOptions(cfg, opts)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, connectError(url, cfg, err).from(opts.Setting)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, connectError(url, cfg, err).from(opts.Setting)
	}
	return pool, nil
}

// parseFailure is why pgx refused url, without pgx's copy of the URL: the
// error names the URL already, redacted, and pgx's own redaction reads
// another scheme's "//user@" as a password ("mysql:xxxxxx@"). A URL of
// another scheme is named as such: pgx would call it bad key=value pairs.
func parseFailure(url string, err error) error {
	if scheme, _, ok := strings.Cut(url, "://"); ok && scheme != "postgres" && scheme != "postgresql" && !strings.ContainsAny(scheme, " =") {
		return fmt.Errorf("%s:// is not PostgreSQL's scheme, and expiryctl's database is PostgreSQL", scheme)
	}
	var parseErr *pgconn.ParseConfigError
	if errors.As(err, &parseErr) {
		if _, reason, ok := strings.Cut(parseErr.Error(), "`: "); ok {
			return errors.New(reason)
		}
	}
	return err
}

// connectError reports err, scrubbing the password of url from the address
// and the message: pgx reads a raw "@" in a password as the end of the
// userinfo, so the rest of the password becomes the host it names.
func connectError(url string, cfg *pgxpool.Config, err error) *ConnectError {
	return &ConnectError{
		Address:          dsn.RedactTextFor(address(cfg), url),
		User:             dsn.RedactTextFor(cfg.ConnConfig.User, url),
		Err:              err,
		UsualPortAnswers: usualPortAnswering(cfg.ConnConfig.Host, cfg.ConnConfig.Port, len(cfg.ConnConfig.Fallbacks), err),
		cause:            dsn.RedactTextFor(rootCause(err), url),
	}
}

// address names every host the URL lists: a multi-host URL (a primary and
// its replicas) that reached none of them must say so, not blame the first.
func address(cfg *pgxpool.Config) string {
	hosts := []string{net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))}
	for _, fb := range cfg.ConnConfig.Fallbacks {
		if hp := net.JoinHostPort(fb.Host, strconv.Itoa(int(fb.Port))); !slices.Contains(hosts, hp) {
			hosts = append(hosts, hp)
		}
	}
	return strings.Join(hosts, ",") + "/" + cfg.ConnConfig.Database
}

// Querier is what both a pool and a transaction offer; domain code that runs
// either inside a caller's transaction or on its own takes one.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// InTx runs fn in a transaction on pool, committing when fn returns nil and
// rolling back otherwise.
func InTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, fn)
}
