package imagetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/image/imagebuild"
	"github.com/hpcq/hpcq/internal/testutil"
)

// DebianImages is examples/blas-in-image's image (Debian 12 with gcc, and
// OpenBLAS's packages in apt's cache) as "dir", "sqfs", "sif" and "oci"
// (a layout). Its image.sh (mmdebstrap) builds it once per machine: the
// four are kept under HPCQ_TEST_IMAGES (default /var/tmp/hpcq-test-images)
// in a directory named by the script's hash, made under a lock, so that
// the packages' tests and later runs share them. Without mmdebstrap the
// test is skipped (failed in CI); a build that fails fails it.
func DebianImages(t *testing.T) map[string]string {
	t.Helper()
	testutil.RequireBinary(t, "mmdebstrap", "scripts/services.sh install images")
	testutil.RequireBinary(t, "mksquashfs", "scripts/services.sh install squashfs")
	script := filepath.Join(testutil.RepoRoot(t), "examples", "blas-in-image", "image.sh")
	data, err := os.ReadFile(script)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	base := os.Getenv("HPCQ_TEST_IMAGES")
	if base == "" {
		base = filepath.Join("/var/tmp", "hpcq-test-images")
	}
	dir := filepath.Join(base, "blas-in-image-"+hex.EncodeToString(sum[:])[:16])
	require.NoError(t, os.MkdirAll(dir, 0o755))
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer lock.Close()
	require.NoError(t, syscall.Flock(int(lock.Fd()), syscall.LOCK_EX))
	out := map[string]string{"dir": filepath.Join(dir, "rootfs"), "sqfs": filepath.Join(dir, "image.sqfs"),
		"sif": filepath.Join(dir, "image.sif"), "oci": filepath.Join(dir, "oci")}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	build := func(name string, make func() error) {
		done := filepath.Join(dir, name+".done")
		if _, err := os.Stat(done); err == nil {
			return
		}
		start := time.Now()
		require.NoError(t, make(), "building the %s of %s", name, script)
		require.NoError(t, os.WriteFile(done, nil, 0o644))
		t.Logf("built the example image's %s in %s (kept in %s)", name, time.Since(start).Round(time.Second), dir)
	}
	build("dir", func() error {
		cmd := exec.CommandContext(ctx, "sh", script, out["dir"])
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Logf("%s", b)
			return err
		}
		return nil
	})
	build("sqfs", func() error {
		_ = os.Remove(out["sqfs"])
		return imagebuild.BuildSquashFS(ctx, out["dir"], out["sqfs"])
	})
	build("sif", func() error { _ = os.Remove(out["sif"]); return imagebuild.BuildSIF(out["sqfs"], out["sif"]) })
	build("oci", func() error {
		_ = os.RemoveAll(out["oci"])
		img, err := imagebuild.OCIFromDir(out["dir"])
		if err != nil {
			return err
		}
		return imagebuild.WriteOCILayout(img, out["oci"])
	})
	return out
}
