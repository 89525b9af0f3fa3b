package schema

import (
	"path/filepath"
	"strings"
	"unicode"
)

// Container names the image a task's commands run in.
type Container struct {
	// Image is the image's path on the worker's file system (a shared file
	// system, or one copied there): a directory holding a root file
	// system, a SquashFS file, an Apptainer/Singularity SIF file, an OCI
	// image layout (directory or tar) or a docker save tarball.
	Image string `json:"image"`
	// Digest, when set, is the image the run expects ("sha256:<hex>": the
	// file's, or the OCI manifest's): a worker whose file has another
	// refuses the task rather than run it in something else.
	Digest string `json:"digest,omitempty"`
}

// ContainerUsed is what a task's commands ran in.
type ContainerUsed struct {
	Image string `json:"image"`
	// Kind is dir, sqfs, sif or oci.
	Kind   string `json:"kind"`
	Digest string `json:"digest,omitempty"`
	// Runtime ran the commands: "hpcq" (the worker's own sandbox: an
	// overlay of the image, its namespaces).
	Runtime string `json:"runtime"`
}

// ErrKindImage: the task's image could not be used (missing, of no known
// kind, another digest than the task names, or a worker without the
// namespaces a container needs).
const ErrKindImage = "image"

// Validate checks the container of a task (nil: none).
func (c *Container) Validate() error {
	if c == nil {
		return nil
	}
	p := c.Image
	switch {
	case p == "":
		return fieldErr("container.image", "empty")
	case len(p) > 4096:
		return fieldErr("container.image", "longer than 4096 bytes")
	case !filepath.IsAbs(p) || filepath.Clean(p) != p:
		return fieldErr("container.image", "%q: an absolute, clean path", p)
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return fieldErr("container.image", "contains a control character")
	}
	if d := c.Digest; d != "" {
		hex, ok := strings.CutPrefix(d, "sha256:")
		if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
			return fieldErr("container.digest", "%q: sha256: and 64 lower-case hex digits", firstBytes([]byte(d), 80))
		}
	}
	return nil
}
