package fileio

import (
	"errors"
	"io/fs"
)

// ErrNotRegular: a file a program left where a regular file was expected
// (a named pipe, a socket, a device, a directory, a symbolic link).
var ErrNotRegular = errors.New("not a regular file")

// TypeName says what kind of file m is, in words.
func TypeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}
