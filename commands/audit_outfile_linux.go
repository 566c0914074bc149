//go:build linux && (amd64 || arm64)

package commands

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"unsafe"
)

// oTmpfile is Linux's O_TMPFILE (__O_TMPFILE | O_DIRECTORY), which the
// syscall package does not define; __O_TMPFILE is 020000000 on amd64 and
// arm64.
const oTmpfile = 0o20000000 | syscall.O_DIRECTORY

// atSymlinkFollow makes linkat follow /proc/self/fd/N to the open file.
const atSymlinkFollow = 0x400

// openUnnamed opens a file in dir that has no name: if the process dies, the
// kernel frees it and nothing is left in dir. It fails where the file system
// or kernel cannot do that, or where /proc (needed to link it later) is
// missing, and the caller falls back to a named temporary file.
func openUnnamed(dir string) (*os.File, error) {
	fd, err := syscall.Open(dir, oTmpfile|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, "(unnamed)"))
	if _, err := os.Stat(procPath(f)); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

func procPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// linkUnnamed gives the unnamed file f a name. When path does not exist yet
// the file is linked there directly and "" is returned; otherwise (link
// never replaces) it is linked under a temporary name beside path, which is
// returned for the caller to rename over path.
func linkUnnamed(f *os.File, path string) (string, error) {
	err := linkat(procPath(f), path)
	if err == nil {
		return "", nil
	}
	if !errors.Is(err, syscall.EEXIST) {
		return "", err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	tmp := path + ".partial-" + hex.EncodeToString(b)
	if err := linkat(procPath(f), tmp); err != nil {
		return "", err
	}
	return tmp, nil
}

func linkat(oldpath, newpath string) error {
	oldp, err := syscall.BytePtrFromString(oldpath)
	if err != nil {
		return err
	}
	newp, err := syscall.BytePtrFromString(newpath)
	if err != nil {
		return err
	}
	fdcwd := -100 // AT_FDCWD
	_, _, errno := syscall.Syscall6(syscall.SYS_LINKAT, uintptr(fdcwd), uintptr(unsafe.Pointer(oldp)),
		uintptr(fdcwd), uintptr(unsafe.Pointer(newp)), atSymlinkFollow, 0)
	if errno != 0 {
		return &os.LinkError{Op: "linkat", Old: oldpath, New: newpath, Err: errno}
	}
	return nil
}
