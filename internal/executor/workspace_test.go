package executor

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/schema"
)

func TestCheckPathRejects(t *testing.T) {
	cases := map[string]string{
		"":                        "empty path",
		"/etc/passwd":             "absolute",
		"../x":                    "escapes",
		"a/../../x":               "escapes",
		"a/..":                    "escapes",
		"./a":                     "not a clean path",
		"a//b":                    "not a clean path",
		"a/":                      "not a clean path",
		".":                       "not a clean path",
		"a\x00b":                  "control or format character",
		"a\nb":                    "control or format character",
		"a\x7fb":                  "control or format character",
		"\xff\xfe":                "UTF-8",
		`a\..\b`:                  "backslash",
		strings.Repeat("a", 1025): "longer than",
	}
	for p, want := range cases {
		err := schema.CheckPath(p)
		require.ErrorIs(t, err, schema.ErrInvalidWorkspace, "%q", p)
		require.Contains(t, err.Error(), want, "%q", p)
	}
	for _, ok := range []string{"a", "src/main.c", "a.b/c-d_e", "deep/er/still/ok.txt", "ünïcode.c", "..a", "a.."} {
		require.NoError(t, schema.CheckPath(ok), ok)
	}
}

func TestWriteFilesAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	files := []schema.File{
		{Path: "ok.c", Content: "int x;"},
		{Path: "../escape.txt", Content: "boom"},
	}
	err := WriteFiles(dir, files, schema.WorkspaceLimits{})
	require.ErrorIs(t, err, schema.ErrInvalidWorkspace)
	require.Contains(t, err.Error(), `"../escape.txt"`)
	entries, _ := os.ReadDir(dir)
	require.Empty(t, entries, "nothing is written when one file is rejected")
	_, err = os.Stat(filepath.Join(filepath.Dir(dir), "escape.txt"))
	require.True(t, os.IsNotExist(err))
}

func TestWriteFilesRules(t *testing.T) {
	for name, c := range map[string]struct {
		files []schema.File
		lim   schema.WorkspaceLimits
		want  string
	}{
		"duplicate":   {[]schema.File{{Path: "a"}, {Path: "a"}}, schema.WorkspaceLimits{}, "duplicate"},
		"file as dir": {[]schema.File{{Path: "a"}, {Path: "a/b"}}, schema.WorkspaceLimits{}, "also a file"},
		"mode":        {[]schema.File{{Path: "a", Mode: "4755"}}, schema.WorkspaceLimits{}, "only regular files"},
		"count":       {[]schema.File{{Path: "a"}, {Path: "b"}}, schema.WorkspaceLimits{MaxFiles: 1}, "2 files, at most 1"},
		"size":        {[]schema.File{{Path: "a", Content: "12345"}}, schema.WorkspaceLimits{MaxFileBytes: 4}, "at most 4 per file"},
		"total":       {[]schema.File{{Path: "a", Content: "123"}, {Path: "b", Content: "123"}}, schema.WorkspaceLimits{MaxTotalBytes: 5}, "total more than 5"},
		"not base64":  {[]schema.File{{Path: "a.png", Content: "not base64!", Encoding: "base64"}}, schema.WorkspaceLimits{}, "content is not base64"},
		"encoding":    {[]schema.File{{Path: "a", Content: "x", Encoding: "gzip"}}, schema.WorkspaceLimits{}, `encoding "gzip"`},
		"base64 size": {[]schema.File{{Path: "a", Content: "AAAAAAAA", Encoding: "base64"}}, schema.WorkspaceLimits{MaxFileBytes: 5}, "6 bytes, at most 5"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			err := WriteFiles(dir, c.files, c.lim)
			require.ErrorIs(t, err, schema.ErrInvalidWorkspace)
			require.Contains(t, err.Error(), c.want)
			entries, _ := os.ReadDir(dir)
			require.Empty(t, entries)
		})
	}
}

func TestWriteFilesModesAndDirs(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteFiles(dir, []schema.File{
		{Path: "run.sh", Content: "#!/bin/sh\n", Mode: "0755"},
		{Path: "src/deep/a.c", Content: "int a;"},
	}, schema.WorkspaceLimits{}))
	fi, err := os.Stat(filepath.Join(dir, "run.sh"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	data, err := os.ReadFile(filepath.Join(dir, "src/deep/a.c"))
	require.NoError(t, err)
	require.Equal(t, "int a;", string(data))
}

// TestWriteFilesBinary: a base64 file (a figure a paper includes) is
// written as its bytes, NUL and all.
func TestWriteFilesBinary(t *testing.T) {
	dir := t.TempDir()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\xff")
	require.NoError(t, WriteFiles(dir, []schema.File{{Path: "plots/a.png", Content: base64.StdEncoding.EncodeToString(png), Encoding: "base64"}}, schema.WorkspaceLimits{}))
	data, err := os.ReadFile(filepath.Join(dir, "plots/a.png"))
	require.NoError(t, err)
	require.Equal(t, png, data)
}

func TestWriteFilesThroughSymlinkStaysInside(t *testing.T) {
	outside := t.TempDir()
	dir := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link")))
	err := WriteFiles(dir, []schema.File{{Path: "link/pwned.txt", Content: "x"}}, schema.WorkspaceLimits{})
	require.Error(t, err)
	require.True(t, errors.Is(err, schema.ErrInvalidWorkspace), "%v", err)
	_, err = os.Stat(filepath.Join(outside, "pwned.txt"))
	require.True(t, os.IsNotExist(err), "a write went through the symlink")
}

// FuzzCheckPath: whatever schema.CheckPath accepts stays inside the workspace.
func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"a", "../a", "/abs", "a/../../b", "a\x00", "....//", "a/./b", "\u202e", "~/x", "a//", "C:\\x", "%2e%2e/x",
		"../../../../../../tmp/x", "/etc/passwd", "evil\nname", "bell\a", "\xc3\x28", "./a", "a/.", `..\..\windows`,
		"\u202egnp.exe", "\ufeffbom", "a/\u200b/b", "dir/../../../etc/shadow", "..", ".", "a/..", strings.Repeat("d/", 600)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if schema.CheckPath(p) != nil {
			return
		}
		root := "/ws/root"
		joined := filepath.Join(root, p)
		if !strings.HasPrefix(joined, root+"/") {
			t.Fatalf("accepted %q resolves to %q, outside %s", p, joined, root)
		}
		if filepath.Clean(p) != p || filepath.IsAbs(p) {
			t.Fatalf("accepted unclean or absolute %q", p)
		}
	})
}
