package testutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hpcq/hpcq/internal/image/imagebuild"
)

// BusyboxRoot builds a small root file system from Debian's
// busybox-static: a static busybox, the applets tests use as links to it,
// the directories a container needs, and an os-release whose ID is id. It
// skips the test (fails it in CI) where busybox-static is not installed.
func BusyboxRoot(t testing.TB, id string) string {
	t.Helper()
	RequireBinary(t, "busybox", "scripts/services.sh install busybox")
	bb, err := imagebuild.StaticBusybox()
	if err != nil {
		t.Skip(err)
	}
	dir := filepath.Join(t.TempDir(), "rootfs")
	if err := imagebuild.MinimalRoot(dir, bb, id); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc/gone"), []byte("removed by a second layer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
