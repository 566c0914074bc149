package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Rules are what a connection of one system takes: a driver's, handed to
// Load, so that this package names no system but the archive's.
type Rules struct {
	// System is the name a connection's system: key gives.
	System string
	// Keys are the keys it takes besides system, password-env and
	// password-file: url or urls, management-url(s), region, endpoint,
	// profile.
	Keys []string
	// Check refuses what the keys cannot say alone (a URL with no login,
	// a URL of another scheme); nil checks nothing more. Its error names
	// no file or line: Load adds them.
	Check func(Connection) error
}

// The keys a connection may have, with the field each fills.
const (
	keySystem         = "system"
	keyURL            = "url"
	keyURLs           = "urls"
	keyManagementURL  = "management-url"
	keyManagementURLs = "management-urls"
	keyRegion         = "region"
	keyEndpoint       = "endpoint"
	keyProfile        = "profile"
	keyPasswordEnv    = "password-env"
	keyPasswordFile   = "password-file"
)

// PostgresRules are the archive's and the reservation database's: a
// postgres:// URL that names its login, since a connection never falls
// back to the operating system's user.
var PostgresRules = Rules{System: SystemPostgres, Keys: []string{keyURL}, Check: func(c Connection) error {
	return CheckURL(c, []string{"postgres", "postgresql"}, true)
}}

// Error is a configuration file that cannot be used, at a line of it.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("configuration %s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("configuration %s: %s", e.File, e.Msg)
}

// DefaultPath is where the configuration is read from when neither
// --config nor EXPIRYCTL_CONFIG names a file:
// $XDG_CONFIG_HOME/expiryctl/config.yaml, else
// ~/.config/expiryctl/config.yaml; empty when neither can be told.
func DefaultPath(getenv func(string) string) string {
	if dir := getenv("XDG_CONFIG_HOME"); dir != "" && filepath.IsAbs(dir) {
		return filepath.Join(dir, "expiryctl", "config.yaml")
	}
	// HOME through getenv, not os.UserHomeDir: the process's environment
	// is the caller's to give, and a test's gives none.
	home := getenv("HOME")
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".config", "expiryctl", "config.yaml")
}

// Locate is the file to read: flag (--config), then EXPIRYCTL_CONFIG, then
// DefaultPath. explicit says a flag or the environment named it, so that
// a file missing there is an error, while a missing default is no file.
func Locate(flag string, getenv func(string) string) (path string, explicit bool) {
	if flag != "" {
		return flag, true
	}
	if p := getenv(EnvConfig); p != "" {
		return p, true
	}
	return DefaultPath(getenv), false
}

// Load reads the file at path and checks every connection against the
// rules of its system. A path that does not exist is an empty Config
// unless explicit; every other problem is an *Error naming the file and
// the line.
func Load(path string, explicit bool, rules []Rules) (*Config, error) {
	if path == "" {
		return &Config{}, nil
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return &Config{}, nil
	}
	if err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("cannot read it: %v", unwrapPath(err))}
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("cannot read it: %v", unwrapPath(err))}
	}
	cfg, err := Parse(path, raw, rules)
	if err != nil {
		return nil, err
	}
	// Whoever may write the file decides which server a connection's name
	// reaches: as ssh does with its configuration, a file others may
	// write is refused (a character device such as /dev/null holds
	// nothing to take).
	if info.Mode().IsRegular() && info.Mode().Perm()&0o022 != 0 {
		return nil, &Error{File: path, Msg: fmt.Sprintf("its mode %04o lets others write it, and whoever writes it decides which server each connection's name reaches: "+
			"run `chmod go-w %s`", info.Mode().Perm(), path)}
	}
	if line := cfg.inlinePasswordLine(); line > 0 && info.Mode().Perm()&0o077 != 0 {
		return nil, &Error{File: path, Line: line, Msg: fmt.Sprintf("a URL holds a password and the file's mode %04o lets others read it: "+
			"run `chmod 600 %s`, or take the password from password-env or password-file", info.Mode().Perm(), path)}
	}
	return cfg, nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Parse reads raw, the text of the file at path (named in errors only).
func Parse(path string, raw []byte, rules []Rules) (*Config, error) {
	p := parser{file: path, rules: append([]Rules{PostgresRules}, rules...)}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, p.yamlError(err)
	}
	cfg := &Config{Path: path}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return cfg, nil
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return cfg, nil
	}
	if err := p.each(top, "the file", []string{"current-context", "contexts"}, func(key, value *yaml.Node) error {
		switch key.Value {
		case "current-context":
			s, err := p.scalar(value, key.Value)
			if err != nil {
				return err
			}
			cfg.CurrentContext = s
		case "contexts":
			return p.each(value, "contexts", nil, func(name, body *yaml.Node) error {
				x, err := p.context(name, body)
				if err != nil {
					return err
				}
				cfg.Contexts = append(cfg.Contexts, x)
				return nil
			})
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if cfg.CurrentContext != "" && !slices.Contains(cfg.ContextNames(), cfg.CurrentContext) {
		return nil, &Error{File: path, Line: p.lineOf(top, "current-context"), Msg: fmt.Sprintf("current-context %q names no context of the file%s",
			cfg.CurrentContext, suggest(cfg.CurrentContext, cfg.ContextNames()))}
	}
	return cfg, nil
}

type parser struct {
	file  string
	rules []Rules
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) error {
	return &Error{File: p.file, Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) where(n *yaml.Node) string { return fmt.Sprintf("%s:%d", p.file, n.Line) }

// yamlError is the YAML library's error, which says "yaml: line N: …",
// as an *Error of the file.
func (p *parser) yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		_, rest, _ := strings.Cut(msg, ":")
		return &Error{File: p.file, Line: line, Msg: "not YAML: " + strings.TrimSpace(rest)}
	}
	return &Error{File: p.file, Msg: "not YAML: " + msg}
}

// each calls fn for every key of the mapping n, refusing a key not in
// known (when known is not nil) with the nearest known one.
func (p *parser) each(n *yaml.Node, what string, known []string, fn func(key, value *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.errorf(n, "%s must be a mapping of keys to values", what)
	}
	// YAML leaves a key given twice to the reader: a second connection
	// of one name would be found or not by the order of a lookup.
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		if key.Kind != yaml.ScalarNode {
			return p.errorf(key, "a key of %s must be a plain word", what)
		}
		if seen[key.Value] {
			return p.errorf(key, "%s has %q twice: keep one", what, key.Value)
		}
		seen[key.Value] = true
		if known != nil && !slices.Contains(known, key.Value) {
			return p.errorf(key, "%s takes no key %q%s (it takes %s)", what, key.Value, suggest(key.Value, known), strings.Join(known, ", "))
		}
		if err := fn(key, value); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) lineOf(n *yaml.Node, key string) int {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i].Line
		}
	}
	return n.Line
}

func (p *parser) scalar(n *yaml.Node, key string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.errorf(n, "%s must be a single value", key)
	}
	return n.Value, nil
}

// list reads a value that may be one string or a list of them.
func (p *parser) list(n *yaml.Node, key string) ([]string, error) {
	if n.Kind == yaml.ScalarNode {
		s, err := p.scalar(n, key)
		return []string{s}, err
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return nil, p.errorf(n, "%s must be a value or a list of values", key)
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		s, err := p.scalar(item, key)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *parser) context(name, body *yaml.Node) (Context, error) {
	if !ValidName(name.Value) {
		return Context{}, p.errorf(name, "context %q: a context's name is %s", name.Value, NameRule)
	}
	x := Context{Name: name.Value, Where: p.where(name)}
	what := fmt.Sprintf("context %q", name.Value)
	if body.Kind == yaml.ScalarNode && body.Tag == "!!null" {
		return x, nil
	}
	err := p.each(body, what, []string{"archive", "outcomes", "connections"}, func(key, value *yaml.Node) error {
		switch key.Value {
		case "archive", "outcomes":
			c, err := p.connection(key, value, SystemPostgres)
			if err != nil {
				return err
			}
			if key.Value == "archive" {
				x.Archive = &c
			} else {
				x.Outcomes = &c
			}
		case "connections":
			if value.Kind == yaml.ScalarNode && value.Tag == "!!null" {
				return nil
			}
			return p.each(value, what+"'s connections", nil, func(cname, cbody *yaml.Node) error {
				if !ValidName(cname.Value) {
					return p.errorf(cname, "connection %q: a connection's name is %s", cname.Value, NameRule)
				}
				c, err := p.connection(cname, cbody, "")
				if err != nil {
					return err
				}
				x.Connections = append(x.Connections, c)
				return nil
			})
		}
		return nil
	})
	return x, err
}

// connection reads one connection; system is the archive's when the key
// is archive: or outcomes:, which take no system: key.
func (p *parser) connection(name, body *yaml.Node, system string) (Connection, error) {
	c := Connection{Name: name.Value, System: system, Where: p.where(name), Line: name.Line}
	what := fmt.Sprintf("connection %q", name.Value)
	if system != "" {
		what = name.Value
	}
	if body.Kind != yaml.MappingNode {
		return c, p.errorf(body, "%s must be a mapping: system, url and where its password comes from", what)
	}
	if system == "" {
		n := p.value(body, keySystem)
		if n == nil {
			return c, p.errorf(name, "%s names no system: add system: (one of %s)", what, strings.Join(p.systems(), ", "))
		}
		s, err := p.scalar(n, keySystem)
		if err != nil {
			return c, err
		}
		c.System = s
	}
	rules, ok := p.rulesOf(c.System)
	if !ok || system == "" && c.System == SystemPostgres {
		return c, p.errorf(p.valueOr(body, keySystem, name), "%s: system %q is not one expiryctl reaches%s (it reaches %s)", what, c.System,
			suggest(c.System, p.systems()), strings.Join(p.systems(), ", "))
	}
	known := append([]string{keyPasswordEnv, keyPasswordFile}, rules.Keys...)
	if system == "" {
		known = append([]string{keySystem}, known...)
	}
	// A key of one that comes in two spellings takes both.
	for _, k := range rules.Keys {
		switch k {
		case keyURL:
			known = append(known, keyURLs)
		case keyManagementURL:
			known = append(known, keyManagementURLs)
		}
	}
	seen := map[string]*yaml.Node{}
	err := p.each(body, what, known, func(key, value *yaml.Node) error {
		seen[key.Value] = key
		var err error
		switch key.Value {
		case keyURL, keyURLs:
			if key.Value == keyURL {
				var s string
				s, err = p.scalar(value, key.Value)
				c.URLs = []string{s}
			} else {
				c.URLs, err = p.list(value, key.Value)
			}
		case keyManagementURL, keyManagementURLs:
			c.ManagementURLs, err = p.list(value, key.Value)
		case keyRegion:
			c.Region, err = p.scalar(value, key.Value)
		case keyEndpoint:
			c.Endpoint, err = p.scalar(value, key.Value)
		case keyProfile:
			c.Profile, err = p.scalar(value, key.Value)
		case keyPasswordEnv:
			c.Password.Env, err = p.scalar(value, key.Value)
		case keyPasswordFile:
			c.Password.File, err = p.scalar(value, key.Value)
			c.Password.File = p.path(c.Password.File)
		}
		return err
	})
	if err != nil {
		return c, err
	}
	for _, pair := range [][2]string{{keyURL, keyURLs}, {keyManagementURL, keyManagementURLs}, {keyPasswordEnv, keyPasswordFile}} {
		if seen[pair[0]] != nil && seen[pair[1]] != nil {
			return c, p.errorf(seen[pair[1]], "%s has both %s and %s: keep one", what, pair[0], pair[1])
		}
	}
	if c.Password.Set() {
		for _, u := range c.URLs {
			if pu, err := url.Parse(u); err == nil && loginPassword(pu) {
				return c, p.errorf(p.valueOr(body, keyPasswordEnv, p.valueOr(body, keyPasswordFile, name)),
					"%s has a password in its URL and a %s too: keep one", what, c.Password.key())
			}
		}
	}
	if rules.Check != nil {
		if err := rules.Check(c); err != nil {
			return c, p.errorf(name, "%s: %v", what, err)
		}
	}
	return c, nil
}

// path is a file's path as the configuration names it: ~/ is the home
// directory, and a relative path is the configuration file's directory's.
func (p *parser) path(s string) string {
	if rest, ok := strings.CutPrefix(s, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	if filepath.IsAbs(s) || s == "" {
		return s
	}
	return filepath.Join(filepath.Dir(p.file), s)
}

// value is the value of key in the mapping n, nil when it has none.
func (p *parser) value(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func (p *parser) valueOr(n *yaml.Node, key string, or *yaml.Node) *yaml.Node {
	if v := p.value(n, key); v != nil {
		return v
	}
	return or
}

func (p *parser) rulesOf(system string) (Rules, bool) {
	for _, r := range p.rules {
		if r.System == system {
			return r, true
		}
	}
	return Rules{}, false
}

func (p *parser) systems() []string {
	var out []string
	for _, r := range p.rules {
		if r.System != SystemPostgres {
			out = append(out, r.System)
		}
	}
	return out
}

// inlinePasswordLine is the line of the first connection whose URL holds
// a password, 0 when none does; a line is the connection's name.
func (c *Config) inlinePasswordLine() int {
	for _, x := range c.Contexts {
		for _, conn := range x.All() {
			if conn.InlinePassword() {
				return conn.Line
			}
		}
	}
	return 0
}

// InlinePassword says whether one of the connection's URLs holds a
// password: in its userinfo, or in a password or sslpassword parameter
// (libpq's and pgx's).
func (c Connection) InlinePassword() bool {
	for _, u := range append(append([]string{}, c.URLs...), c.ManagementURLs...) {
		if pu, err := url.Parse(u); err == nil && (loginPassword(pu) || pu.Query().Has("sslpassword")) {
			return true
		}
	}
	return false
}

// passwordParams are the query parameters of a URL that hold a secret:
// the login's password and a client key's passphrase, as libpq and pgx
// read them.
var passwordParams = []string{"password", "sslpassword"}

// loginPassword says whether u holds its login's password, in its
// userinfo or a password parameter.
func loginPassword(u *url.URL) bool {
	if u.User != nil {
		if _, has := u.User.Password(); has {
			return true
		}
	}
	return u.Query().Has("password")
}

// CheckURL refuses a connection whose URLs are not of one of schemes, or,
// when login is set, name no login: a connection never logs in as the
// operating system's user. It is for a system's Rules.Check.
func CheckURL(c Connection, schemes []string, login bool) error {
	if len(c.URLs) == 0 {
		return fmt.Errorf("no url: add url: %s://USER@HOST:PORT/…", schemes[0])
	}
	for _, raw := range c.URLs {
		u, err := url.Parse(raw)
		if err != nil || !slices.Contains(schemes, strings.ToLower(u.Scheme)) || u.Host == "" {
			return fmt.Errorf("url %q is not a %s:// URL with a host", redactURL(raw), schemes[0])
		}
		if login && (u.User == nil || u.User.Username() == "") {
			return fmt.Errorf("url %s names no login, and expiryctl never logs in as the operating system's user: write it as %s://USER@%s%s",
				redactURL(raw), u.Scheme, u.Host, u.EscapedPath())
		}
	}
	return nil
}

// redactURL is raw with its password, if any, replaced, in its userinfo
// and in the query parameters that hold one (whose query is then written
// in key order).
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if q := u.Query(); slices.ContainsFunc(passwordParams, q.Has) {
			for _, k := range passwordParams {
				if q.Has(k) {
					q.Set(k, "xxxxx")
				}
			}
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	if scheme, _, ok := strings.Cut(raw, "://"); ok {
		return scheme + "://…"
	}
	return "…"
}
