//go:build !unix

package fileio

import (
	"io/fs"
	"os"
)

func open(path string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag, perm)
}

func rename(oldpath, newpath string) error {
	return os.Rename(oldpath, newpath)
}
