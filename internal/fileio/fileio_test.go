package fileio

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriteAndRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, size := range []int{0, 1, 511, 512, 513, 4096, 1 << 20} {
		p := filepath.Join(dir, "f")
		data := bytes.Repeat([]byte("abcdefg\n"), size/8+1)[:size]
		if err := WriteFile(p, data, 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("size %d: read %d bytes back", size, len(got))
		}
		if want, _ := os.ReadFile(p); !bytes.Equal(want, got) {
			t.Fatalf("size %d: os.ReadFile disagrees", size)
		}
	}
	// A shorter write truncates, as os.WriteFile does.
	p := filepath.Join(dir, "f")
	if err := WriteFile(p, []byte("short"), 0o640); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadFile(p); string(got) != "short" {
		t.Fatalf("after a shorter write: %q", got)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&^0o640 != 0 {
		t.Fatalf("mode %v, want within 0640", fi.Mode())
	}
}

// A file whose size the kernel does not know (/proc) is read to its end.
func TestReadFileUnknownSize(t *testing.T) {
	t.Parallel()
	got, err := ReadFile("/proc/self/status")
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no /proc on this system")
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "Name:") || !strings.HasSuffix(string(got), "\n") {
		t.Fatalf("/proc/self/status read as %q", got)
	}
}

func TestErrorsAsPackageOS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	_, err := ReadFile(missing)
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != missing || pe.Op != "open" {
		t.Fatalf("reading a missing file: %v", err)
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir"), nil, 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("writing in a missing directory: %v", err)
	}
	// A directory is not a file to read or write, as in package os.
	for _, f := range []func() error{
		func() error { _, err := ReadFile(dir); return err },
		func() error { return WriteFile(dir, []byte("x"), 0o644) },
	} {
		if err := f(); !errors.As(err, &pe) || pe.Path != dir || !errors.Is(err, syscall.EISDIR) {
			t.Fatalf("a directory as a file: %v", err)
		}
	}
	// A rename onto a directory fails with a LinkError naming both.
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = WriteFileAtomic(filepath.Join(dir, "d"), []byte("x"))
	var le *os.LinkError
	if !errors.As(err, &le) || le.New != filepath.Join(dir, "d") {
		t.Fatalf("renaming onto a directory: %v", err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "result.json")
	for _, s := range []string{"first\n", "second, longer\n", "3\n"} {
		if err := WriteFileAtomic(p, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); string(got) != s {
			t.Fatalf("got %q, want %q", got, s)
		}
		if _, err := os.Stat(p + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the temporary file is left: %v", err)
		}
	}
}

// The package's way against package os's, for a node's result file
// (about 2 KB): written through a temporary file and renamed, then read.
func BenchmarkWriteAtomicRead(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 2048)
	dir := b.TempDir()
	p := filepath.Join(dir, "result.json")
	b.Run("fileio", func(b *testing.B) {
		for b.Loop() {
			if err := WriteFileAtomic(p, data); err != nil {
				b.Fatal(err)
			}
			if _, err := ReadFile(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("os", func(b *testing.B) {
		for b.Loop() {
			if err := os.WriteFile(p+".tmp", data, 0o644); err != nil {
				b.Fatal(err)
			}
			if err := os.Rename(p+".tmp", p); err != nil {
				b.Fatal(err)
			}
			if _, err := os.ReadFile(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestAppender: writes append, to what is there and to what another
// writer appended meanwhile; after Close, writing or closing again is
// fs.ErrClosed; a write that fails is a PathError naming the file.
func TestAppender(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "prompts.jsonl")
	if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := OpenAppend(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenAppend(p)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 1<<20)
	for _, w := range []struct {
		f    *Appender
		data []byte
	}{{a, []byte("1\n")}, {b, []byte("2\n")}, {a, append(big, '\n')}, {b, []byte("3\n")}} {
		if n, err := w.f.Write(w.data); n != len(w.data) || err != nil {
			t.Fatalf("wrote %d of %d bytes: %v", n, len(w.data), err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	if want := "0\n1\n2\n" + string(big) + "\n3\n"; string(got) != want {
		t.Fatalf("the file has %d bytes, want %d in order", len(got), len(want))
	}
	var pe *fs.PathError
	if _, err := a.Write([]byte("4\n")); !errors.Is(err, fs.ErrClosed) || !errors.As(err, &pe) || pe.Path != p {
		t.Fatalf("a write after Close: %v", err)
	}
	if err := a.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("a second Close: %v", err)
	}
	if _, err := OpenAppend(filepath.Join(p, "under-a-file")); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("opening under a file: %v", err)
	}
	full, err := OpenAppend("/dev/full")
	if err != nil {
		t.Skipf("no /dev/full to make a write fail: %v", err)
	}
	defer full.Close()
	if _, err := full.Write([]byte("x")); !errors.Is(err, syscall.ENOSPC) || !errors.As(err, &pe) || pe.Path != "/dev/full" {
		t.Fatalf("a write to /dev/full: %v", err)
	}
}
