package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// EnvConfig names the environment variable that points at the
// configuration file, below --config and above the default path.
const EnvConfig = "EXPIRYCTL_CONFIG"

// EnvContext names the environment variable that picks a context, below
// --context and above the file's current-context.
const EnvContext = "EXPIRYCTL_CONTEXT"

// Config is one configuration file as read: its contexts, in the order the
// file lists them, and which one is current.
type Config struct {
	// Path is the file's path; empty for a Config that no file holds
	// (none exists at the default path).
	Path string
	// CurrentContext is the file's current-context; empty when it names
	// none.
	CurrentContext string
	// Contexts are the file's contexts in their order.
	Contexts []Context
}

// Context is one named set of connections: the archive, the reservation
// database and the queue systems' connections, each by name.
type Context struct {
	Name string
	// Archive is expiryctl's own database; nil when the context names
	// none (the flag, the environment or the default then does).
	Archive *Connection
	// Outcomes is the reservation database the policy's outcome and gap
	// queries run against; nil: expiryctl's own database.
	Outcomes *Connection
	// Connections are the queue systems' connections, in the file's order.
	Connections []Connection
	// Where is FILE:LINE of the context's name.
	Where string
}

// Connection is one server and the login expiryctl reaches it as, by the
// name letters record. Which fields a system takes is its driver's Rules.
type Connection struct {
	// Name is how letters, requests and the audit trail name it.
	Name string
	// System is the queue system's name (its driver's), or SystemPostgres
	// for the archive and the reservation database.
	System string
	// URLs are the server's URLs: one, or a cluster's nodes in order.
	// A URL carries the login; its password may come from Password.
	URLs []string
	// ManagementURLs are a broker's management API, one per node.
	ManagementURLs []string
	// Region, Endpoint and Profile are a cloud queue's: the region, an
	// endpoint other than the provider's own, and the named profile of
	// the provider's shared configuration its credentials come from.
	Region, Endpoint, Profile string
	// Password says where the password comes from when no URL holds one.
	Password Secret
	// Where is where the connection was defined: FILE:LINE, or the flag
	// or environment variable that stands in for a file; Line is the
	// line, 0 for no file.
	Where string
	Line  int
}

// SystemPostgres is the system of the archive's and the reservation
// database's connections.
const SystemPostgres = "postgres"

// namePattern is what a connection or context name may be: it stands in a
// queue's name between "://" and the next "/", so it holds no ':', '/',
// '@' or space, and it reads the same in a URL, a shell and a file name.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidName says whether s may name a connection or a context: 1 to 63
// letters, digits, '.', '_' or '-', the first a letter or digit.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// NameRule says in words what ValidName checks, for errors.
const NameRule = "1 to 63 letters, digits, '.', '_' or '-', beginning with a letter or digit"

// Context is the context called name, or the current one when name is
// empty. A Config with no contexts has an empty current one, so that
// flags and the environment alone still work; an unknown name is an
// error that lists the names there are.
func (c *Config) Context(name string) (*Context, error) {
	if name == "" {
		name = c.CurrentContext
	}
	if name == "" {
		if len(c.Contexts) == 1 {
			return &c.Contexts[0], nil
		}
		if len(c.Contexts) > 1 {
			return nil, fmt.Errorf("%s names %d contexts and no current-context: pick one with --context NAME or `expiryctl config use-context NAME` (%s)",
				c.describe(), len(c.Contexts), strings.Join(c.ContextNames(), ", "))
		}
		return &Context{}, nil
	}
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i], nil
		}
	}
	if len(c.Contexts) == 0 {
		return nil, fmt.Errorf("context %q: %s names no contexts; `expiryctl config init` writes one", name, c.describe())
	}
	return nil, fmt.Errorf("context %q is not in %s%s (its contexts: %s)", name, c.describe(), suggest(name, c.ContextNames()), strings.Join(c.ContextNames(), ", "))
}

// ContextNames are the contexts' names in the file's order.
func (c *Config) ContextNames() []string {
	names := make([]string, len(c.Contexts))
	for i, x := range c.Contexts {
		names[i] = x.Name
	}
	return names
}

func (c *Config) describe() string {
	if c.Path == "" {
		return "the configuration (no file)"
	}
	return c.Path
}

// Connection is the connection called name, if the context defines it.
func (x *Context) Connection(name string) (Connection, bool) {
	for _, c := range x.Connections {
		if c.Name == name {
			return c, true
		}
	}
	return Connection{}, false
}

// All are the context's connections of every kind: the archive, the
// reservation database and the queue systems', in that order.
func (x *Context) All() []Connection {
	var all []Connection
	for _, p := range []*Connection{x.Archive, x.Outcomes} {
		if p != nil {
			all = append(all, *p)
		}
	}
	return append(all, x.Connections...)
}

// OfSystem are the context's connections of system, in the file's order.
func (x *Context) OfSystem(system string) []Connection {
	var out []Connection
	for _, c := range x.Connections {
		if c.System == system {
			out = append(out, c)
		}
	}
	return out
}

// ConnectionNames are the names of the context's connections, sorted.
func (x *Context) ConnectionNames() []string {
	names := make([]string, 0, len(x.Connections))
	for _, c := range x.Connections {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return names
}

// UnknownConnectionError is a name that no connection of the context has:
// what a letter, a request or a flag named, refused before anything
// connected.
type UnknownConnectionError struct {
	// Name is the connection named; System the system that named it.
	Name, System string
	// Context is the context looked in ("" when none is configured), and
	// Known the names it has.
	Context string
	Known   []string
	// File is the configuration file, "" when there is none.
	File string
}

func (e *UnknownConnectionError) Error() string {
	where := "no configuration file defines it"
	if e.File != "" {
		where = fmt.Sprintf("context %q of %s does not define it", e.Context, e.File)
		if e.Context == "" {
			where = fmt.Sprintf("%s does not define it", e.File)
		}
	}
	known := ""
	if len(e.Known) > 0 {
		known = suggest(e.Name, e.Known) + " (defined: " + strings.Join(e.Known, ", ") + ")"
	}
	return fmt.Sprintf("connection %q (%s) is not configured: %s%s; nothing was dialled. Add it under connections: in the configuration "+
		"(`expiryctl config view` shows the file; docs/configuration.md says how), naming the server and the login to reach it with",
		e.Name, e.System, where, known)
}

// Rule names the refusal in the errors that say which rule refused.
func (e *UnknownConnectionError) Rule() string { return "connection-unknown" }

// suggest is ", did you mean X?" when one of known is within two edits of
// name, else "".
func suggest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := EditDistance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(", did you mean %q?", best)
}

// Nearest sorts known, each once, by its edit distance from name (ties by
// name), and names the nearest when it is near enough to be a typo of
// name: at most half of the longer of the two differs. A driver's "queue
// does not exist" lists the sorted names and suggests the near one.
func Nearest(name string, known []string) (sorted []string, near string) {
	slices.Sort(known)
	known = slices.Compact(known)
	dist := make(map[string]int, len(known))
	for _, k := range known {
		dist[k] = EditDistance(name, k)
	}
	slices.SortStableFunc(known, func(a, b string) int { return dist[a] - dist[b] })
	if len(known) > 0 {
		d, longer := dist[known[0]], max(len([]rune(name)), len([]rune(known[0])))
		if d > 0 && 2*d <= longer {
			near = known[0]
		}
	}
	return known, near
}

// EditDistance is the Levenshtein distance between a and b, by runes:
// the fewest insertions, deletions and substitutions that make one the
// other. The suggestions of a typo ("did you mean …?") are the names
// nearest by it, here and in the commands and drivers.
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev, cur := make([]int, len(rb)+1), make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
