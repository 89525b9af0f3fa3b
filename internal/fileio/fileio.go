package fileio

import (
	"io/fs"
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
func OpenAppend(path string) (*Appender, error) {
	a, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	return &Appender{a}, nil
}

// Appender is a file opened by OpenAppend. A Write appends the whole
// slice on an O_APPEND descriptor (one write(2) unless the kernel takes
// less), so that writers of the same file do not cut each other's
// records. Unlike an *os.File it is not safe for concurrent use, and it
// asks nothing of the kernel or the runtime beyond the open: the caller
// serializes Write and Close, and closes it.
type Appender struct{ appender }

// Write appends p.
func (a *Appender) Write(p []byte) (int, error) { return a.write(p) }

// Close closes the file; a second Close is an error, as for *os.File.
func (a *Appender) Close() error { return a.close() }
