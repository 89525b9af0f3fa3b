package fileio

import (
	"io/fs"
	"os"
)

// WriteFile writes data to the file at path, creating it with perm (before
// the umask) or truncating it, as os.WriteFile does.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return writeFile(path, data, perm)
}

// WriteFileAtomic writes data to path through path+".tmp" and a rename, so
// that a reader (or a run resumed after a crash) sees the old file or the
// whole new one, never a part.
func WriteFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return rename(tmp, path)
}

// ReadFile reads the whole file at path, as os.ReadFile does.
func ReadFile(path string) ([]byte, error) {
	return readFile(path)
}

// OpenAppend opens the file at path for appending, creating it with mode
// 0644 (before the umask) if it is not there.
func OpenAppend(path string) (*os.File, error) {
	return open(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
}
