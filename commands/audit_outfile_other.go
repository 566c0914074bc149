//go:build !(linux && (amd64 || arm64))

package commands

import (
	"errors"
	"os"
)

// openUnnamed is not available here: exports use a named temporary file.
func openUnnamed(string) (*os.File, error) {
	return nil, errors.New("unnamed temporary files are not supported on this system")
}

func linkUnnamed(*os.File, string) (string, error) {
	return "", errors.New("unnamed temporary files are not supported on this system")
}
