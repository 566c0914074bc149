package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// SetCurrentContext makes name the file's current context, keeping the
// rest of the file (its comments and order) as it was. name must be one
// of the file's contexts.
func SetCurrentContext(path, name string, rules []Rules) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return &Error{File: path, Msg: fmt.Sprintf("cannot read it: %v", unwrapPath(err))}
	}
	cfg, err := Parse(path, raw, rules)
	if err != nil {
		return err
	}
	if _, err := cfg.Context(name); err != nil || name == "" {
		if err == nil {
			err = errors.New("name a context")
		}
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return (&parser{file: path}).yamlError(err)
	}
	top := doc.Content[0]
	set := false
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "current-context" {
			top.Content[i+1].Value, top.Content[i+1].Tag, top.Content[i+1].Style = name, "!!str", 0
			set = true
		}
	}
	if !set {
		top.Content = append([]*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "current-context"},
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: name},
		}, top.Content...)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return &Error{File: path, Msg: fmt.Sprintf("cannot write it: %v", err)}
	}
	mode := fs.FileMode(0o600)
	if info, err := os.Stat(path); err == nil {
		mode = info.Mode().Perm()
	}
	return replace(path, out.Bytes(), mode)
}

// replace writes data to path through a temporary file beside it, with
// mode, so that a reader never sees half a file.
func replace(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.yaml")
	if err != nil {
		return &Error{File: path, Msg: fmt.Sprintf("cannot write beside it: %v", unwrapPath(err))}
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return &Error{File: path, Msg: fmt.Sprintf("cannot write it: %v", err)}
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return &Error{File: path, Msg: fmt.Sprintf("cannot write it: %v", err)}
	}
	if err := tmp.Close(); err != nil {
		return &Error{File: path, Msg: fmt.Sprintf("cannot write it: %v", err)}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return &Error{File: path, Msg: fmt.Sprintf("cannot write it: %v", unwrapPath(err))}
	}
	return nil
}

// WriteNew writes a new configuration file at path, readable and
// writable by its owner alone (mode 0600, also over a file that had
// another), making its directory when it is missing. An existing file is
// refused unless force.
func WriteNew(path string, data []byte, force bool) error {
	if _, err := os.Stat(path); err == nil && !force {
		return &Error{File: path, Msg: "exists already: `expiryctl config view` shows it; --force writes over it, or --config names another file"}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return &Error{File: path, Msg: fmt.Sprintf("cannot make its directory: %v", unwrapPath(err))}
	}
	return replace(path, data, 0o600)
}

// Render writes cfg as the file's text, header as its first comment
// lines: what `config init` writes and `config view` shows. Every URL's
// password is replaced with xxxxx, so that neither holds a secret; where
// a password comes from (password-env, password-file) is written as it is.
func Render(cfg *Config, header string) []byte {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(header), "\n") {
		if header != "" {
			b.WriteString("# " + line + "\n")
		}
	}
	if cfg.CurrentContext != "" {
		fmt.Fprintf(&b, "current-context: %s\n", quote(cfg.CurrentContext))
	}
	if len(cfg.Contexts) == 0 {
		b.WriteString("contexts: {}\n")
		return []byte(b.String())
	}
	b.WriteString("contexts:\n")
	for _, x := range cfg.Contexts {
		fmt.Fprintf(&b, "  %s:\n", quote(x.Name))
		for _, p := range []struct {
			key string
			c   *Connection
		}{{"archive", x.Archive}, {"outcomes", x.Outcomes}} {
			if p.c != nil {
				fmt.Fprintf(&b, "    %s:\n", p.key)
				renderConnection(&b, *p.c, "      ", false)
			}
		}
		if len(x.Connections) == 0 {
			continue
		}
		b.WriteString("    connections:\n")
		for _, c := range x.Connections {
			fmt.Fprintf(&b, "      %s:\n", quote(c.Name))
			renderConnection(&b, c, "        ", true)
		}
	}
	return []byte(b.String())
}

func renderConnection(b *strings.Builder, c Connection, indent string, system bool) {
	line := func(key, value string) {
		if value != "" {
			fmt.Fprintf(b, "%s%s: %s\n", indent, key, quote(value))
		}
	}
	if system {
		line(keySystem, c.System)
	}
	list := func(one, many string, values []string) {
		switch len(values) {
		case 0:
		case 1:
			line(one, redactURL(values[0]))
		default:
			fmt.Fprintf(b, "%s%s:\n", indent, many)
			for _, v := range values {
				fmt.Fprintf(b, "%s  - %s\n", indent, quote(redactURL(v)))
			}
		}
	}
	list(keyURL, keyURLs, c.URLs)
	list(keyManagementURL, keyManagementURLs, c.ManagementURLs)
	line(keyRegion, c.Region)
	line(keyEndpoint, c.Endpoint)
	line(keyProfile, c.Profile)
	line(keyPasswordEnv, c.Password.Env)
	line(keyPasswordFile, c.Password.File)
}

// quote is s as a YAML scalar: plain when it reads back as the same
// string, double-quoted otherwise.
func quote(s string) string {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(s), &n); err == nil && len(n.Content) == 1 && n.Content[0].Kind == yaml.ScalarNode &&
		n.Content[0].Tag == "!!str" && n.Content[0].Value == s && !strings.ContainsAny(s, "#\n") && strings.TrimSpace(s) == s {
		return s
	}
	out, _ := yaml.Marshal(s)
	v := strings.TrimSpace(string(out))
	if !strings.HasPrefix(v, `"`) && !strings.HasPrefix(v, "'") {
		return fmt.Sprintf("%q", s)
	}
	return v
}
