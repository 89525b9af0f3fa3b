package executor

import (
	"errors"
	"fmt"
	"os"
	"path"

	"github.com/hpcq/hpcq/pkg/schema"
)

// WriteFiles checks files and writes them under dir, which must exist and
// be empty. Writes go through os.Root, so no symlink inside dir can lead a
// write outside it. On a check failure nothing is written.
func WriteFiles(dir string, files []schema.File, l schema.WorkspaceLimits) error {
	if err := schema.CheckFiles(files, l); err != nil {
		return err
	}
	if len(files) == 0 {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	for _, f := range files {
		mode, _ := schema.PermOf(string(f.Mode))
		if d := path.Dir(f.Path); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("%w: path %q: %v", schema.ErrInvalidWorkspace, f.Path, err)
			}
		}
		data, err := f.Bytes()
		if err != nil {
			return err
		}
		fh, err := root.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return fmt.Errorf("%w: path %q: %v", schema.ErrInvalidWorkspace, f.Path, err)
		}
		_, werr := fh.Write(data)
		cerr := fh.Close()
		if werr != nil || cerr != nil {
			return fmt.Errorf("write %q: %w", f.Path, errors.Join(werr, cerr))
		}
		// The umask may have narrowed the mode.
		if err := root.Chmod(f.Path, mode); err != nil {
			return fmt.Errorf("chmod %q: %w", f.Path, err)
		}
	}
	return nil
}
