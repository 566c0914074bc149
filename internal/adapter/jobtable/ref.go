package jobtable

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/expiryctl/expiryctl/deadletter"
)

// PasswordEnv holds the password of the jobs table's login, so that it
// need not be in a --queue value.
const PasswordEnv = "EXPIRYCTL_JOBTABLE_PASSWORD"

// Ref is a jobs table named as a command names it,
// jobtable://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE/SCHEMA.TABLE[?sslmode=…]:
// the connection string that reaches its database, and the table.
type Ref struct {
	// ConnString reaches the table's database as the reference's login;
	// it may hold the password, and is never printed.
	ConnString string
	// Table is SCHEMA.TABLE, as a Mapping names it.
	Table string
	name  string
}

// IsRef reports whether s names a jobs table.
func IsRef(s string) bool { return strings.HasPrefix(s, deadletter.JobTableQueuePrefix) }

// ParseRef reads a jobs table's reference; its errors never show the
// password.
func ParseRef(s string) (Ref, error) {
	if !IsRef(s) {
		return Ref{}, fmt.Errorf("not a jobs table: want %sHOST[:PORT]/DATABASE/SCHEMA.TABLE", deadletter.JobTableQueuePrefix)
	}
	u, err := url.Parse(s)
	if err != nil {
		return Ref{}, errors.New("the jobs table's reference is not a URL: want jobtable://[USER@]HOST[:PORT]/DATABASE/SCHEMA.TABLE")
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if u.Host == "" || len(parts) != 2 || parts[0] == "" || !strings.Contains(parts[1], ".") {
		return Ref{}, fmt.Errorf("%s names no database and SCHEMA.TABLE: want jobtable://[USER@]HOST[:PORT]/DATABASE/SCHEMA.TABLE", redacted(u))
	}
	conn := url.URL{Scheme: "postgres", Host: u.Host, Path: "/" + parts[0], RawQuery: u.RawQuery}
	if u.User != nil {
		conn.User = u.User
		if _, has := u.User.Password(); !has && os.Getenv(PasswordEnv) != "" {
			conn.User = url.UserPassword(u.User.Username(), os.Getenv(PasswordEnv))
		}
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	name := deadletter.JobTableQueuePrefix + net.JoinHostPort(strings.ToLower(u.Hostname()), port) + "/" + url.PathEscape(parts[0]) + "/" + parts[1]
	return Ref{ConnString: conn.String(), Table: parts[1], name: name}, nil
}

// Name is how letters name the table: jobtable://HOST:PORT/DATABASE/SCHEMA.TABLE,
// without credentials or settings.
func (r Ref) Name() string { return r.name }

// String is Name, so that a Ref printed by mistake shows no password.
func (r Ref) String() string { return r.name }

func redacted(u *url.URL) string {
	c := *u
	c.User, c.RawQuery = nil, ""
	return c.String()
}
