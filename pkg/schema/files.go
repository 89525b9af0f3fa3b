package schema

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A task's files as the executor writes them into a workspace: what a path
// may be and how much a task may carry. The scheduler checks generated code
// with the same rules before it publishes a task.

// ErrInvalidWorkspace is wrapped by every rejection of a task's files.
var ErrInvalidWorkspace = errors.New("invalid workspace")

// WorkspaceLimits bound what a task may write.
type WorkspaceLimits struct {
	// MaxFiles defaults to 256.
	MaxFiles int
	// MaxFileBytes defaults to 4 MiB.
	MaxFileBytes int
	// MaxTotalBytes defaults to 32 MiB.
	MaxTotalBytes int
}

func (l WorkspaceLimits) withDefaults() WorkspaceLimits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = 256
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = 4 << 20
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = 32 << 20
	}
	return l
}

func wsErr(p, rule string) error {
	return fmt.Errorf("%w: path %q: %s", ErrInvalidWorkspace, p, rule)
}

// CheckPath reports whether p may name a file inside a workspace: relative,
// clean, valid UTF-8, no control characters, no ".." and not the workspace
// itself. The error names the path and the rule it breaks.
func CheckPath(p string) error {
	switch {
	case p == "":
		return wsErr(p, "empty path")
	case len(p) > 1024:
		return wsErr(p[:64]+"...", "longer than 1024 bytes")
	case !utf8.ValidString(p):
		return wsErr(p, "not valid UTF-8")
	}
	for _, r := range p {
		// Format characters (Cf) include the bidirectional overrides that
		// make a name display as another.
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return wsErr(p, fmt.Sprintf("contains a control or format character (%U)", r))
		}
	}
	if strings.HasPrefix(p, "/") || filepath.IsAbs(p) {
		return wsErr(p, "absolute paths are not allowed")
	}
	if strings.Contains(p, `\`) {
		return wsErr(p, "backslashes are not allowed")
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "..":
			return wsErr(p, "'..' escapes the workspace")
		case "", ".":
			return wsErr(p, "not a clean path (empty or '.' segment)")
		}
	}
	if path.Clean(p) != p {
		return wsErr(p, "not a clean path")
	}
	return nil
}

// PermOf maps a task file's mode to a permission.
func PermOf(m string) (os.FileMode, error) {
	switch m {
	case "", "0644", "644":
		return 0o644, nil
	case "0755", "755":
		return 0o755, nil
	}
	return 0, fmt.Errorf("%w: mode %q: only regular files 0644 or 0755", ErrInvalidWorkspace, m)
}

// CheckFiles validates every file of a task against l before anything is
// written.
func CheckFiles(files []File, l WorkspaceLimits) error {
	l = l.withDefaults()
	if len(files) > l.MaxFiles {
		return fmt.Errorf("%w: %d files, at most %d", ErrInvalidWorkspace, len(files), l.MaxFiles)
	}
	seen := make(map[string]bool, len(files))
	total := 0
	for _, f := range files {
		if err := CheckPath(f.Path); err != nil {
			return err
		}
		if seen[f.Path] {
			return wsErr(f.Path, "duplicate path")
		}
		seen[f.Path] = true
		if _, err := PermOf(string(f.Mode)); err != nil {
			return fmt.Errorf("%w (file %q)", err, f.Path)
		}
		if f.size() > l.MaxFileBytes {
			return wsErr(f.Path, fmt.Sprintf("%d bytes, at most %d per file", f.size(), l.MaxFileBytes))
		}
		if _, err := f.Bytes(); err != nil {
			return err
		}
		total += f.size()
		if total > l.MaxTotalBytes {
			return fmt.Errorf("%w: files total more than %d bytes", ErrInvalidWorkspace, l.MaxTotalBytes)
		}
	}
	// A file may not also be a directory of another file ("a" and "a/b").
	for p := range seen {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if seen[d] {
				return wsErr(p, fmt.Sprintf("its directory %q is also a file", d))
			}
		}
	}
	return nil
}
