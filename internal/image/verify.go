package image

import (
	"bytes"
	"context"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// verifyBlobs says which blob of img is not what the manifest names it:
// the config file against the manifest's config digest, each layer's bytes
// against the manifest's digest and size. An OCI layout's blobs are files
// named by their digests that nothing reads against them: a blob edited in
// place would otherwise unpack under the manifest digest a run pins.
// A docker save tarball names its layers by file, not by digest (the
// library computes their digests from what it reads, compressing a layer
// stored plain): its layers are read against the config's diff ids
// instead. An unpack happens once per image and machine, so reading every
// blob once more is paid once.
//
// go-containerregistry's validate.Image does this and more, but also
// refuses tars holding a path twice, which real images' layers do.
func verifyBlobs(ctx context.Context, img v1.Image) error {
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("its config: %w", err)
	}
	if h, _, _ := v1.SHA256(bytes.NewReader(raw)); h != m.Config.Digest { // a read of memory: no error
		return fmt.Errorf("the config blob %s holds %s: not what the manifest names", m.Config.Digest, h)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if len(layers) != len(m.Layers) {
		return fmt.Errorf("the manifest names %d layers, the image has %d", len(m.Layers), len(layers))
	}
	_, archive := img.(archiveImage)
	var diffIDs []v1.Hash
	if archive {
		cf, err := img.ConfigFile()
		if err != nil {
			return fmt.Errorf("its config: %w", err)
		}
		diffIDs = cf.RootFS.DiffIDs
		if len(diffIDs) != len(layers) {
			return fmt.Errorf("the config names %d layers, the image has %d", len(diffIDs), len(layers))
		}
	}
	for i, l := range layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		want, size := m.Layers[i].Digest, m.Layers[i].Size
		open := l.Compressed
		if archive {
			want, size, open = diffIDs[i], -1, l.Uncompressed
		}
		rc, err := open()
		if err != nil {
			return fmt.Errorf("layer %d (%s): %w", i, want, err)
		}
		h, n, err := v1.SHA256(readerCtx{ctx, rc})
		rc.Close()
		switch {
		case err != nil:
			return fmt.Errorf("layer %d (%s): %w", i, want, err)
		case h != want:
			return fmt.Errorf("the layer blob %s holds %s (%d bytes): changed since the image was written", want, h, n)
		case size >= 0 && n != size:
			return fmt.Errorf("the layer blob %s is %d bytes, the manifest says %d", want, n, size)
		}
	}
	return nil
}

// archiveImage is an image read from a docker save tarball.
type archiveImage struct{ v1.Image }
