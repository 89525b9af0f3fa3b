package fileio

import (
	"io"
	"io/fs"
	"os"
)

// WriteFile writes data to the file at path, creating it with perm (before
// the umask) or truncating it, as os.WriteFile does.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	f, err := open(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
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
	f, err := open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := 512
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 && int64(int(fi.Size())) == fi.Size() {
		size = int(fi.Size()) + 1 // one more, to see the end without growing
	}
	data := make([]byte, 0, size)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return data, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}

// OpenAppend opens the file at path for appending, creating it with mode
// 0644 (before the umask) if it is not there.
func OpenAppend(path string) (*os.File, error) {
	return open(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
}
