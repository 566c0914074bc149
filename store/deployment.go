package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strings"
)

// Deployment names one expiryctl installation on a PostgreSQL cluster. Roles
// belong to the cluster, not to a database, so two deployments that shared
// group names would share their people: an operator of one would operate
// the other, and one owner's grant would reach both. A named deployment's
// groups carry its name (expiryctl_NAME_operator, …), fixed when a DBA
// bootstraps it and its first migrate installs the schema; the unnamed
// deployment ("") keeps the plain names (expiryctl_operator, …), for a
// cluster that serves one deployment only.
type Deployment string

// Roles are what each of a deployment's five groups is for, in the order
// docs show them; a group's name is its deployment's prefix and its role.
var Roles = []string{"ingester", "operator", "approver", "auditor", "admin"}

// Groups are the unnamed deployment's groups, which the migrations and the
// definition files name: a named deployment's files are rendered with its
// own names as they are applied (Deployment.render).
var Groups = Deployment("").Groups()

const groupPrefix = "expiryctl_"

var deploymentName = regexp.MustCompile(`^[a-z][a-z0-9]{0,23}$`)

// CheckDeploymentName refuses a name that cannot be part of a group's name:
// lower-case letters and digits, a letter first, at most 24.
func CheckDeploymentName(name string) error {
	if !deploymentName.MatchString(name) {
		return fmt.Errorf("deployment name %q: use lower-case letters and digits, starting with a letter, at most 24 (it becomes part of each group's name, expiryctl_NAME_operator)", name)
	}
	return nil
}

// Named reports whether d is a named deployment.
func (d Deployment) Named() bool { return d != "" }

// String is the name, or "(unnamed)".
func (d Deployment) String() string {
	if d == "" {
		return "(unnamed)"
	}
	return string(d)
}

// Group is the name of d's group for name, given as the role ("operator"),
// as the unnamed deployment's group ("expiryctl_operator") or as d's own
// group; ok is false when it names none of them.
func (d Deployment) Group(name string) (group string, ok bool) {
	role := name
	if !slices.Contains(Roles, name) {
		of, r, ok := ParseGroup(name)
		if !ok || of.Named() && of != d {
			return "", false
		}
		role = r
	}
	return d.prefix() + role, true
}

var groupName = regexp.MustCompile(`^expiryctl_(?:([a-z][a-z0-9]{0,23})_)?(ingester|operator|approver|auditor|admin)$`)

// ParseGroup reads a group's name as the deployment whose group it is and
// its role; ok is false for a name that is no deployment's group.
func ParseGroup(name string) (d Deployment, role string, ok bool) {
	m := groupName.FindStringSubmatch(name)
	if m == nil {
		return "", "", false
	}
	return Deployment(m[1]), m[2], true
}

// MustGroup is Group, for a role that is one of Roles.
func (d Deployment) MustGroup(role string) string {
	name, ok := d.Group(role)
	if !ok {
		panic("store: no expiryctl role " + role)
	}
	return name
}

// Groups are d's five groups, in Roles' order.
func (d Deployment) Groups() []string {
	out := make([]string, len(Roles))
	for i, r := range Roles {
		out[i] = d.prefix() + r
	}
	return out
}

func (d Deployment) prefix() string {
	if d == "" {
		return groupPrefix
	}
	return groupPrefix + string(d) + "_"
}

var unnamedGroup = regexp.MustCompile(`\bexpiryctl_(ingester|operator|approver|auditor|admin)\b`)

// render is sql with the unnamed deployment's group names replaced by d's:
// the migrations and the definition files name the unnamed groups, and a
// GRANT needs a literal name.
func (d Deployment) render(sql string) string {
	if d == "" {
		return sql
	}
	return unnamedGroup.ReplaceAllString(sql, d.prefix()+"$1")
}

// deploymentGroupsOfSchema are the roles that hold USAGE on the schema, as
// an array: whose groups they are says which deployment the schema serves.
const deploymentGroupsOfSchema = `(SELECT coalesce(array_agg(r.rolname::text ORDER BY r.rolname), '{}')
	FROM pg_namespace n, aclexplode(n.nspacl) a JOIN pg_roles r ON r.oid = a.grantee
	WHERE n.nspname = '` + Schema + `' AND a.privilege_type = 'USAGE')`

// ReadDeployment says which deployment the database's schema serves: the
// one whose operator group may use the schema. The migrations grant that
// USAGE, so a schema that is only part way migrated already says it; one
// with no grant yet (or no schema) is the unnamed deployment's.
func ReadDeployment(ctx context.Context, q Querier) (Deployment, error) {
	var holders []string
	if err := q.QueryRow(ctx, `SELECT `+deploymentGroupsOfSchema).Scan(&holders); err != nil {
		return "", fmt.Errorf("read which deployment the schema serves: %w", err)
	}
	return deploymentOf(holders), nil
}

// deploymentOf is the deployment of the operator group among holders; a
// named one wins over the unnamed, which a schema being moved to its name
// (Migrate with a name) still holds until the move is done.
func deploymentOf(holders []string) Deployment {
	var d Deployment
	for _, h := range holders {
		if of, role, ok := ParseGroup(h); ok && role == "operator" && of.Named() {
			d = of
		}
	}
	return d
}

// renderedFS is fsys with every .sql file rendered for a deployment.
type renderedFS struct {
	fsys fs.FS
	d    Deployment
}

func (r renderedFS) Open(name string) (fs.File, error) {
	f, err := r.fsys.Open(name)
	if err != nil || !strings.HasSuffix(name, ".sql") || !r.d.Named() {
		return f, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	text := []byte(r.d.render(string(raw)))
	return &renderedFile{Reader: bytes.NewReader(text), info: renderedInfo{FileInfo: info, size: int64(len(text))}}, nil
}

func (r renderedFS) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(r.fsys, name) }

type renderedFile struct {
	*bytes.Reader
	info fs.FileInfo
}

func (f *renderedFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *renderedFile) Close() error               { return nil }

type renderedInfo struct {
	fs.FileInfo
	size int64
}

func (i renderedInfo) Size() int64 { return i.size }
