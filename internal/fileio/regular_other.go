//go:build !unix

package fileio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrNotRegular: a file a program left where a regular file was expected.
var ErrNotRegular = errors.New("not a regular file")

// OpenRegular opens rel under root if it is a regular file (checked on the
// open file).
func OpenRegular(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	f, err := root.Open(rel)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = &fs.PathError{Op: "open", Path: rel, Err: fmt.Errorf("%w: %s", ErrNotRegular, TypeName(fi.Mode()))}
		}
		return nil, nil, err
	}
	return f, fi, nil
}

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
	}
	return "not a regular file"
}
