package schema

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
)

// StoredImagePrefix names an image pushed into the cluster's object store
// (`scheduler image push`) rather than a path: "store:sha256:<hex>".
const StoredImagePrefix = "store:"

// Container names the image a task's commands run in.
type Container struct {
	// Image is the image's path on the worker's file system (a shared file
	// system, or one copied there): a directory holding a root file
	// system, a SquashFS file, an Apptainer/Singularity SIF file, an OCI
	// image layout (directory or tar) or a docker save tarball; or
	// "store:sha256:<hex>", a file pushed into the cluster's object store.
	Image string `json:"image"`
	// Digest, when set, is the image the run expects ("sha256:<hex>": the
	// file's, or the OCI manifest's): a worker whose file has another
	// refuses the task rather than run it in something else.
	Digest string `json:"digest,omitempty"`
	// Runtime runs the task's commands in the image: "" or RuntimeHPCQ
	// (the worker's own sandbox), or a site's: RuntimeApptainer,
	// RuntimeSingularity, RuntimeCharliecloud, RuntimePodman. A site's
	// runtime keeps no layer: what the commands write over the image is
	// lost with the command.
	Runtime string `json:"runtime,omitempty"`
	// Layers are the layers the node starts from, over the image, the
	// oldest first: the digests of what its ancestors' commands wrote
	// there (packages Phase 1 installed). A child inherits its parent's
	// environment as it inherits its memory.
	Layers []string `json:"layers,omitempty"`
}

// Runtimes of container images.
const (
	RuntimeHPCQ         = "hpcq"
	RuntimeApptainer    = "apptainer"
	RuntimeSingularity  = "singularity"
	RuntimeCharliecloud = "charliecloud"
	RuntimePodman       = "podman"
)

// Runtimes are the runtimes a task may name.
var Runtimes = []string{RuntimeHPCQ, RuntimeApptainer, RuntimeSingularity, RuntimeCharliecloud, RuntimePodman}

// MaxLayers bounds Container.Layers: a node's depth in the tree (the
// overlay stacks at most 500 layers).
const MaxLayers = 128

// ContainerUsed is what a task's commands ran in.
type ContainerUsed struct {
	Image string `json:"image"`
	// Kind is dir, sqfs, sif or oci.
	Kind   string `json:"kind"`
	Digest string `json:"digest,omitempty"`
	// Runtime ran the commands: "hpcq" (the worker's own sandbox: an
	// overlay of the image, its namespaces).
	Runtime string `json:"runtime"`
	// Layers are the layers (digests) the node started from: the task's,
	// but for those this worker could not have (LayerNote says why).
	Layers []string `json:"layers,omitempty"`
	// Layer is the layer the node left: what its commands wrote over the
	// image and Layers, as an OCI layer tar's digest ("": nothing), and
	// LayerBytes its size. Its children start from Layers and Layer.
	Layer      string `json:"layer,omitempty"`
	LayerBytes int64  `json:"layer_bytes,omitempty"`
	// LayerHolds says what Layer adds (the Debian and Python packages
	// installed, where other files went): what the prompts of the nodes
	// below say their environment already has.
	LayerHolds string `json:"layer_holds,omitempty"`
	// LayerNote says why the node did not start from every layer it was
	// given, or why its own layer is not kept or not shared with other
	// workers ("": it did and it is).
	LayerNote string `json:"layer_note,omitempty"`
	// GPUDriver are the host's GPU driver files bound in for a task with
	// GPUs (libcuda, libnvidia-ml, nvidia-smi...: they must match the host's
	// kernel module), as Apptainer's --nv binds them.
	GPUDriver []string `json:"gpu_driver,omitempty"`
}

// Inherited is the layers a child of the node that used c starts from.
func (c *ContainerUsed) Inherited() []string {
	if c == nil {
		return nil
	}
	out := append([]string(nil), c.Layers...)
	if c.Layer != "" && len(out) < MaxLayers {
		out = append(out, c.Layer)
	}
	return out
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
	if d, ok := strings.CutPrefix(p, StoredImagePrefix); ok {
		if !isDigest(d) {
			return fieldErr("container.image", "%q: %ssha256: and 64 lower-case hex digits (scheduler image push prints it)", firstBytes([]byte(p), 80), StoredImagePrefix)
		}
		p = "/"
	}
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
	if d := c.Digest; d != "" && !isDigest(d) {
		return fieldErr("container.digest", "%q: sha256: and 64 lower-case hex digits", firstBytes([]byte(d), 80))
	}
	if c.Runtime != "" && !slices.Contains(Runtimes, c.Runtime) {
		return fieldErr("container.runtime", "%q: one of %s", firstBytes([]byte(c.Runtime), 40), strings.Join(Runtimes, ", "))
	}
	if len(c.Layers) > MaxLayers {
		return fieldErr("container.layers", "%d layers, at most %d", len(c.Layers), MaxLayers)
	}
	for i, d := range c.Layers {
		if !isDigest(d) {
			return fieldErr(fmt.Sprintf("container.layers[%d]", i), "%q: sha256: and 64 lower-case hex digits", firstBytes([]byte(d), 80))
		}
	}
	return nil
}

func isDigest(d string) bool {
	hex, ok := strings.CutPrefix(d, "sha256:")
	return ok && len(hex) == 64 && strings.Trim(hex, "0123456789abcdef") == ""
}
