package benchutil

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestTrace: a trace is written and can be stopped twice; no path traces
// nothing.
func TestTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.trace")
	stop, err := Trace(path)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	stop()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if head := data[:min(len(data), 16)]; !bytes.HasPrefix(head, []byte("go 1.")) || !bytes.Contains(head, []byte(" trace")) {
		t.Fatalf("not a Go execution trace: %q", head)
	}
	none, err := Trace("")
	if err != nil {
		t.Fatal(err)
	}
	none()
	if _, err := Trace(filepath.Join(t.TempDir(), "missing", "x.trace")); err == nil {
		t.Fatal("a trace to a directory that does not exist: no error")
	}
}
