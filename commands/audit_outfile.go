package commands

import (
	"fmt"
	"os"
	"path/filepath"
)

// atomicFile is an output file that appears at its path complete or not at
// all: data goes to a temporary file in the same directory, which is synced
// and renamed over the path only when the writer commits. A crash or kill -9
// before that leaves the path as it was.
//
// Where the system allows (Linux, a file system with O_TMPFILE), the
// temporary file has no name at all until it is linked into place, so a
// killed export leaves nothing behind. Elsewhere it is named
// "<name>.partial-<random>", which says what it is if a crash leaves one.
type atomicFile struct {
	*os.File
	path string
	dir  string
	// tmp is the temporary file's name, or "" while it has none (O_TMPFILE).
	tmp  string
	done bool
}

// createAtomic starts writing the file that commit will put at path.
func createAtomic(path string) (*atomicFile, error) {
	path = filepath.Clean(path)
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("--out %s is a directory: name a file in it", path)
	}
	dir := filepath.Dir(path)
	if f, err := openUnnamed(dir); err == nil {
		return &atomicFile{File: f, path: path, dir: dir}, nil
	}
	// Audit exports are private by default (0600): they name people and
	// what they looked at.
	f, err := os.CreateTemp(dir, filepath.Base(path)+".partial-*")
	if err != nil {
		return nil, fmt.Errorf("cannot write --out %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("cannot write --out %s: %w", path, err)
	}
	return &atomicFile{File: f, path: path, dir: dir, tmp: f.Name()}, nil
}

// commit makes the written data durable and puts it at the path: sync the
// file, move it into place, sync the directory so the new name survives a
// power cut.
func (a *atomicFile) commit() error {
	if err := a.Sync(); err != nil {
		a.abort()
		return fmt.Errorf("write --out %s: %w", a.path, err)
	}
	if a.tmp == "" {
		name, err := linkUnnamed(a.File, a.path)
		if err != nil {
			a.abort()
			return fmt.Errorf("write --out %s: %w", a.path, err)
		}
		// name is "" when the file went straight to the path (it did not
		// exist), else the temporary name that now replaces it.
		a.tmp = name
	}
	if a.tmp != "" {
		if err := os.Rename(a.tmp, a.path); err != nil {
			a.abort()
			return fmt.Errorf("write --out %s: %w", a.path, err)
		}
	}
	a.done = true
	if err := a.Close(); err != nil {
		return fmt.Errorf("write --out %s: %w", a.path, err)
	}
	return syncDir(a.dir)
}

// abort discards the file; the path is left as it was. It is safe to call
// after commit, where it does nothing.
func (a *atomicFile) abort() {
	if a.done {
		return
	}
	a.done = true
	_ = a.Close()
	if a.tmp != "" {
		_ = os.Remove(a.tmp)
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
