//go:build !unix

package fileio

import (
	"fmt"
	"io/fs"
	"os"
)

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
