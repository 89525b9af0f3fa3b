//go:build !unix

package fileio

import (
	"io/fs"
	"os"
)

func writeFile(path string, data []byte, perm fs.FileMode) error {
	return os.WriteFile(path, data, perm)
}

func readFile(path string) ([]byte, error) {
	return os.ReadFile(path)
}

func open(path string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag, perm)
}

func rename(oldpath, newpath string) error {
	return os.Rename(oldpath, newpath)
}
