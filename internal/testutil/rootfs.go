package testutil

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BusyboxRoot builds a small root file system from Debian's
// busybox-static: a static busybox, the applets tests use as links to it,
// the directories a container needs, and an os-release whose ID is id. It
// skips the test (fails it in CI) where busybox-static is not installed.
func BusyboxRoot(t testing.TB, id string) string {
	t.Helper()
	RequireBinary(t, "busybox", "scripts/services.sh install busybox")
	bb, _ := exec.LookPath("busybox")
	if f, err := elf.Open(bb); err == nil {
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Skipf("%s is not static: install Debian's busybox-static", bb)
			}
		}
	}
	dir := filepath.Join(t.TempDir(), "rootfs")
	for _, d := range []string{"bin", "etc", "tmp", "proc", "dev", "sys", "usr/bin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, applet := range []string{"sh", "cat", "ls", "echo", "id", "true", "touch", "grep", "wc"} {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{"etc/os-release": "ID=" + id + "\n", "etc/gone": "removed by a second layer\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
