package store

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/dsn"
)

// ConnectError reports that a connection to PostgreSQL failed. Its message
// names the address (never the password), what failed (the server is
// unreachable, the database does not exist, the credentials or TLS were
// refused) and the next step for that failure.
type ConnectError struct {
	Address string
	// User is the login the connection was for, when known.
	User string
	// Setting names where the URL came from, for the advice (default
	// databaseURLSetting).
	Setting string
	Err     error
	// UsualPortAnswers is the address on the same host and PostgreSQL's
	// usual port 5432 where a server answered when the address asked for
	// refused the connection: the port is likely mistyped. Empty when not
	// probed, or when nothing answered there either.
	UsualPortAnswers string
	// cause is Err's message with the URL's password scrubbed, set by Open,
	// which knows the URL. It is kept instead of the secrets themselves so
	// that printing the struct cannot show them.
	cause string
}

func (e *ConnectError) Error() string {
	cause := e.cause
	if cause == "" {
		cause = dsn.RedactText(rootCause(e.Err))
	}
	what, next := e.diagnosis()
	return fmt.Sprintf("%s at %s: %s\n%s", what, e.Address, cause, next)
}

func (e *ConnectError) Unwrap() error { return e.Err }

// databaseURLSetting is where expiryctl's own database URL comes from.
const databaseURLSetting = "--database-url / EXPIRYCTL_DATABASE_URL"

// from names setting as where the URL came from; "" keeps the default.
func (e *ConnectError) from(setting string) *ConnectError {
	e.Setting = setting
	return e
}

// diagnosis says what failed and what to do about it. A development hint
// (start the local server) is given only where the server could not be
// reached at all.
func (e *ConnectError) diagnosis() (what, next string) {
	setting := e.Setting
	if setting == "" {
		setting = databaseURLSetting
	}
	user := "your login"
	if e.User != "" {
		user = fmt.Sprintf("user %q", e.User)
	}
	var pgErr *pgconn.PgError
	if errors.As(e.Err, &pgErr) {
		switch {
		case pgErr.Code == "3D000": // invalid_catalog_name
			return "no such database on PostgreSQL",
				"check the database name in " + setting + "; a new database is created by its administrator (createdb), then `expiryctl migrate` as the schema owner"
		case pgErr.Code == "28P01" || pgErr.Code == "28000": // invalid_password, invalid_authorization_specification
			return "PostgreSQL refused the credentials",
				fmt.Sprintf("check the user and password for %s in %s (or PGPASSWORD, ~/.pgpass); an administrator creates a login with `createuser` and gives it its groups with `expiryctl access grant`", user, setting)
		case pgErr.Code == "53300": // too_many_connections
			return "PostgreSQL has no connection left",
				"try again in a moment; if it persists, an administrator checks max_connections and who holds them (pg_stat_activity)"
		case strings.HasPrefix(pgErr.Code, "57P"): // operator_intervention: shutting down, starting up
			return "PostgreSQL is not accepting connections",
				"the server is starting, stopping or recovering: try again in a moment"
		case pgErr.Code == "42501": // insufficient_privilege: no CONNECT on the database
			return "PostgreSQL refused the login on this database",
				fmt.Sprintf("%s may not connect to it: an administrator grants CONNECT (for expiryctl's database, membership of one of its groups: `expiryctl access grant`); check the login in %s", user, setting)
		}
		return "PostgreSQL refused the connection",
			"check " + setting + "; the server's log says more"
	}
	if isTLSFailure(e.Err) {
		return "TLS with PostgreSQL failed",
			"check sslmode, sslrootcert and the host name in " + setting + ": the server must offer TLS for sslmode=require and up, and its certificate must match the host for verify-full"
	}
	var dnsErr *net.DNSError
	if errors.As(e.Err, &dnsErr) && dnsErr.IsNotFound {
		return "cannot reach PostgreSQL",
			"the host name does not resolve: check the host in " + setting
	}
	if e.UsualPortAnswers != "" {
		return "cannot reach PostgreSQL",
			"nothing listens on that port, but a server answers at " + e.UsualPortAnswers + ", PostgreSQL's usual port: check the port in " + setting
	}
	return "cannot reach PostgreSQL",
		"check the host and port in " + setting + " and that the server runs and listens there; " +
			"on a development machine start it with `scripts/services.sh` (or `pg_ctlcluster --skip-systemctl-redirect <version> main start`)"
}

// usualPortAnswering is host:5432 when err is a refused connection to one
// host on another port and a server accepts a connection at host:5432
// within a moment; otherwise "".
func usualPortAnswering(host string, port uint16, fallbacks int, err error) string {
	if port == usualPort || fallbacks > 0 || !errors.Is(err, syscall.ECONNREFUSED) {
		return ""
	}
	usual := net.JoinHostPort(host, strconv.Itoa(usualPort))
	conn, dialErr := net.DialTimeout("tcp", usual, 500*time.Millisecond)
	if dialErr != nil {
		return ""
	}
	_ = conn.Close()
	return usual
}

// usualPort is PostgreSQL's default port.
const usualPort = 5432

// isTLSFailure says whether err is a TLS handshake or certificate failure,
// or the server declining TLS.
func isTLSFailure(err error) bool {
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	if errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "tls: ") || strings.Contains(msg, "server refused TLS connection")
}
