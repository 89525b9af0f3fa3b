//go:build unix

package fileio

import (
	"io/fs"
	"os"
	"syscall"
)

// open opens path with one open system call (retried if a signal cut it
// short) and no poller registration.
func open(path string, flag int, perm fs.FileMode) (*os.File, error) {
	for {
		fd, err := syscall.Open(path, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == nil {
			return os.NewFile(uintptr(fd), path), nil
		}
		if err != syscall.EINTR {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
	}
}

// rename renames oldpath to newpath with one system call. Unlike
// os.Rename it does not first look whether newpath is a directory: the
// callers rename their own temporary files over plain files.
func rename(oldpath, newpath string) error {
	for {
		err := syscall.Rename(oldpath, newpath)
		if err == nil {
			return nil
		}
		if err != syscall.EINTR {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
		}
	}
}
