package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Secret is where a connection's password comes from when its URL holds
// none: an environment variable, or a file. Neither: the password is the
// server's client library's own to find (libpq's ~/.pgpass and service
// file for PostgreSQL, the shared configuration's profile for a cloud
// queue), or there is none.
type Secret struct {
	// Env names the environment variable that holds the password.
	Env string
	// File is the path of a file whose first line is the password.
	File string
}

// Set says whether the secret names a source.
func (s Secret) Set() bool { return s.Env != "" || s.File != "" }

func (s Secret) key() string {
	if s.File != "" {
		return keyPasswordFile
	}
	return keyPasswordEnv
}

// Describe says where the password comes from, for `config view`: the
// variable's or the file's name, never its value.
func (s Secret) Describe() string {
	switch {
	case s.Env != "":
		return "$" + s.Env
	case s.File != "":
		return s.File
	}
	return ""
}

// Resolve reads the password: from the environment variable (getenv), or
// the first line of the file. A source that is named and gives nothing is
// an error naming the connection and the source, never a guess; a secret
// with no source is "", nil.
func (s Secret) Resolve(connection string, getenv func(string) string) (string, error) {
	switch {
	case s.Env != "":
		v := getenv(s.Env)
		if v == "" {
			return "", fmt.Errorf("connection %q takes its password from $%s, which is not set: export it, or change password-env in the configuration", connection, s.Env)
		}
		return v, nil
	case s.File != "":
		raw, err := os.ReadFile(s.File)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", fmt.Errorf("connection %q takes its password from %s, which cannot be read: %w", connection, s.File, err)
		}
		line, _, _ := strings.Cut(string(raw), "\n")
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			return "", fmt.Errorf("connection %q takes its password from %s, whose first line is empty", connection, s.File)
		}
		return line, nil
	}
	return "", nil
}
