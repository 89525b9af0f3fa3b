package schema_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/schema"
)

// TestContainerValidation: an image is an absolute, clean path or a
// pushed image's store reference; layers are digests, at most MaxLayers.
func TestContainerValidation(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	for _, ok := range []schema.Container{
		{Image: "/shared/images/gcc.sif"},
		{Image: "store:" + d},
		{Image: "/i.sqfs", Digest: d, Layers: []string{d, d}},
	} {
		require.NoError(t, ok.Validate(), "%+v", ok)
	}
	for want, bad := range map[string]schema.Container{
		"absolute, clean":       {Image: "images/gcc.sif"},
		`"/a/../b.sif": an abs`: {Image: "/a/../b.sif"},
		"store:sha256: and 64":  {Image: "store:latest"},
		"container.layers[1]":   {Image: "/i.sif", Layers: []string{d, "sha256:XYZ"}},
		"at most 128":           {Image: "/i.sif", Layers: make([]string, schema.MaxLayers+1)},
		"control character":     {Image: "/i\n.sif"},
	} {
		err := bad.Validate()
		require.Error(t, err, want)
		require.Contains(t, err.Error(), want)
	}
	used := &schema.ContainerUsed{Layers: []string{d}, Layer: "sha256:" + strings.Repeat("cd", 32)}
	require.Equal(t, []string{d, used.Layer}, used.Inherited(), "a child starts from its parent's layers and the one it left")
	require.Nil(t, (*schema.ContainerUsed)(nil).Inherited())
}
