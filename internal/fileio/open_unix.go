//go:build unix

package fileio

import (
	"io"
	"io/fs"
	"os"
	"syscall"
)

// openFD opens path with one open system call (retried if a signal cut
// it short) and no poller registration, giving the descriptor.
func openFD(path string, flag int, perm fs.FileMode) (int, error) {
	for {
		fd, err := syscall.Open(path, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == nil {
			return fd, nil
		}
		if err != syscall.EINTR {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
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

// writeFile writes data to path on a descriptor of its own, without an
// *os.File: os.NewFile asks the kernel for the descriptor's flags and
// registers a cleanup, which cost as much as the write for the small
// files of a node.
func writeFile(path string, data []byte, perm fs.FileMode) error {
	fd, err := openFD(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := writeAll(fd, path, data); err != nil {
		syscall.Close(fd)
		return err
	}
	if err := syscall.Close(fd); err != nil {
		return &fs.PathError{Op: "close", Path: path, Err: err}
	}
	return nil
}

// readFile reads the whole file at path on a descriptor of its own (see
// writeFile), sized by fstat when the file says its size.
func readFile(path string) ([]byte, error) {
	fd, err := openFD(path, syscall.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	size := 512
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err == nil && st.Size > 0 && int64(int(st.Size)) == st.Size {
		size = int(st.Size) + 1 // one more, to see the end without growing
	}
	data := make([]byte, 0, size)
	for {
		n, err := syscall.Read(fd, data[len(data):cap(data)])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return data, &fs.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return data, nil
		}
		data = data[:len(data)+n]
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}

// appender is an Appender's descriptor (-1 once closed).
type appender struct {
	fd   int
	path string
}

func openAppend(path string) (appender, error) {
	fd, err := openFD(path, syscall.O_WRONLY|syscall.O_APPEND|syscall.O_CREAT, 0o644)
	return appender{fd, path}, err
}

func (a *appender) write(p []byte) (int, error) {
	if a.fd < 0 {
		return 0, &fs.PathError{Op: "write", Path: a.path, Err: fs.ErrClosed}
	}
	return writeAll(a.fd, a.path, p)
}

// writeAll writes all of p to fd (path names it in an error), retrying
// what a signal or a short write left.
func writeAll(fd int, path string, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := syscall.Write(fd, p[n:])
		if err == syscall.EINTR {
			continue
		}
		if err == nil && k == 0 {
			err = io.ErrShortWrite
		}
		if err != nil {
			return n, &fs.PathError{Op: "write", Path: path, Err: err}
		}
		n += k
	}
	return n, nil
}

func (a *appender) close() error {
	if a.fd < 0 {
		return &fs.PathError{Op: "close", Path: a.path, Err: fs.ErrClosed}
	}
	fd := a.fd
	a.fd = -1
	if err := syscall.Close(fd); err != nil {
		return &fs.PathError{Op: "close", Path: a.path, Err: err}
	}
	return nil
}
