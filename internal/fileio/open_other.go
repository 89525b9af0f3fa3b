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

func rename(oldpath, newpath string) error {
	return os.Rename(oldpath, newpath)
}

type appender struct{ f *os.File }

func openAppend(path string) (appender, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	return appender{f}, err
}

func (a *appender) write(p []byte) (int, error) { return a.f.Write(p) }

func (a *appender) close() error { return a.f.Close() }
