//go:build unix

package fileio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// OpenRegular opens rel under root for reading only if it is a regular
// file: the directories on the way are resolved inside root (a link out of
// it is refused), the last name is opened without following a link and
// without blocking (a named pipe with no writer would block an open
// forever), and the type is checked on the open descriptor, so nothing can
// swap the file between the check and the read. For the files a generated
// program leaves in its workspace: its metrics, outputs and plots.
func OpenRegular(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	dir, base := filepath.Split(filepath.Clean(rel))
	if dir == "" {
		dir = "."
	}
	d, err := root.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	// What is there, not followed: a socket or a device is never opened
	// (an open may act on a device; a socket refuses one), and the type is
	// checked again on the descriptor.
	fi, err := lstatAt(d, base)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, &fs.PathError{Op: "open", Path: rel, Err: fmt.Errorf("%w: %s", ErrNotRegular, TypeName(fi.Mode()))}
	}
	var fd int
	for {
		fd, err = unix.Openat(int(d.Fd()), base, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, nil, &fs.PathError{Op: "open", Path: rel, Err: fmt.Errorf("%w: a symbolic link", ErrNotRegular)}
	case err != nil:
		return nil, nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	fi, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &fs.PathError{Op: "open", Path: rel, Err: fmt.Errorf("%w: %s", ErrNotRegular, TypeName(fi.Mode()))}
	}
	return f, fi, nil
}

// lstatAt is the file name in directory d, a link not followed.
func lstatAt(d *os.File, name string) (fs.FileInfo, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil {
			break
		}
		if err != unix.EINTR {
			return nil, err
		}
	}
	return modeInfo{name: name, mode: unixMode(uint32(st.Mode))}, nil
}

// unixMode is the type bits of a stat mode as an fs.FileMode.
func unixMode(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// modeInfo is a FileInfo of a name and a type only.
type modeInfo struct {
	name string
	mode fs.FileMode
}

func (m modeInfo) Name() string       { return m.name }
func (m modeInfo) Size() int64        { return 0 }
func (m modeInfo) Mode() fs.FileMode  { return m.mode }
func (m modeInfo) ModTime() time.Time { return time.Time{} }
func (m modeInfo) IsDir() bool        { return m.mode.IsDir() }
func (m modeInfo) Sys() any           { return nil }
