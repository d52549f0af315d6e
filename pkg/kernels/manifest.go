package kernels

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/symmem/symmem/internal/ops"
	embedded "github.com/symmem/symmem/kernels"
)

// Manifest is what the manifest beside one of symmem's kernel sources declares of a
// kernel (kernels/triton/SOURCE.manifest.json, kernels/cuda/SOURCE.manifest.json; the
// one place these facts are written), as every sidecar of the kernel carries it: the
// build writes it there, and kernels/manifest.py writes it into sidecars built before.
// A user's kernels carry none: symmem's table of them (UserKernels) says the same of
// theirs.
type Manifest struct {
	// Ops are the operations the kernel serves (ops.Op's names); Receives those whose
	// receiver waits with it (wait_signal: put-signal's).
	Ops      []string `json:"ops,omitempty"`
	Receives []string `json:"receives,omitempty"`
	// DType is the element type it combines (bf16, float16, float32; "" for one that
	// only moves bytes), and RedOps the reduction operators it combines with, by
	// ops.RedOp's names (those its op argument takes; first is the test fault's).
	DType  string   `json:"dtype,omitempty"`
	RedOps []string `json:"redops,omitempty"`
	// Warps are the warp counts it is built for, [1] for one that runs as one warp
	// whatever a launch asks; none for a CUDA kernel whose block is chosen at launch.
	Warps []int `json:"warps,omitempty"`
	// From is the manifest's path under kernels/ ("" for a sidecar that carries none).
	From string `json:"manifest,omitempty"`
}

// Declared says whether the sidecar carries its kernel's manifest.
func (m Manifest) Declared() bool { return m.From != "" }

// OneWarp says whether the manifest has the kernel run as one warp.
func (m Manifest) OneWarp() bool { return slices.Equal(m.Warps, []int{1}) }

// Combines says whether the kernel combines with r: one of its RedOps, or sum for a
// sidecar that lists none (a reducing kernel built before its sidecar said, or a user's
// whose kernel combines with the one operator its name says).
func (m Manifest) Combines(r ops.RedOp) bool {
	if len(m.RedOps) == 0 {
		return r.Name == ops.Sum.Name
	}
	return slices.Contains(m.RedOps, r.Name)
}

// RedOpNames are the operators it combines with, for messages.
func (m Manifest) RedOpNames() string {
	if len(m.RedOps) == 0 {
		return ops.Sum.Name
	}
	return strings.Join(m.RedOps, ", ")
}

// Kernel is one kernel of a catalogue with its manifest.
type Kernel struct {
	Impl   string `json:"impl"`
	Kernel string `json:"kernel"`
	Manifest
}

// Manifests lists the catalogue's kernels once each, sorted by implementation and
// name, each with the manifest its first sidecar carries (the tests hold every sidecar
// of a kernel to the same).
func (c *Catalog) Manifests() []Kernel {
	var out []Kernel
	for _, a := range c.Artifacts {
		if !slices.ContainsFunc(out, func(k Kernel) bool { return k.Impl == a.Impl && k.Kernel == a.Kernel }) {
			out = append(out, Kernel{a.Impl, a.Kernel, a.Manifest})
		}
	}
	sortKernels(out)
	return out
}

// ManifestOf is impl's kernel's manifest in the catalogue, and whether the catalogue
// has the kernel.
func (c *Catalog) ManifestOf(impl, kernel string) (Manifest, bool) {
	if c.first != nil {
		a, ok := c.first[[2]string{impl, kernel}]
		if !ok {
			return Manifest{}, false
		}
		return a.Manifest, true
	}
	for _, a := range c.Artifacts {
		if a.Impl == impl && a.Kernel == kernel {
			return a.Manifest, true
		}
	}
	return Manifest{}, false
}

// OneWarp says whether impl's kernel runs as one warp whatever a launch asks: its
// manifest says so (symmem's own kernels), or, for a kernel without one (a user's),
// symmem's table of users' kernels does (UserKernel.OneWarp).
func (c *Catalog) OneWarp(impl, kernel string) bool {
	if m, ok := c.ManifestOf(impl, kernel); ok && m.Declared() {
		return m.OneWarp()
	}
	return table().oneWarp[kernel]
}

func sortKernels(ks []Kernel) {
	slices.SortFunc(ks, func(a, b Kernel) int {
		if c := strings.Compare(a.Impl, b.Impl); c != 0 {
			return c
		}
		return strings.Compare(a.Kernel, b.Kernel)
	})
}

// DefaultManifests is Default's catalogue's Manifests, read once per process: what the
// registry of symmem's own implementations is built from, when every command starts.
// From the embedded catalogue it reads one sidecar a kernel (the build names them
// IMPL.KERNEL.*.json), not the whole catalogue: a tenth of its time.
var DefaultManifests = sync.OnceValue(func() []Kernel {
	if os.Getenv(DirEnv) != "" {
		return Default().Manifests() // whichever catalogue Default takes, read whole
	}
	sub, _ := fs.Sub(embedded.FS, "build")
	// The index kernels pack writes (a test keeps it equal to the sidecars): one file
	// to read when every command starts, not a sidecar a kernel.
	if b, err := fs.ReadFile(sub, IndexName); err == nil {
		var ks []Kernel
		if err := json.Unmarshal(b, &ks); err != nil {
			panic(fmt.Errorf("kernel index %s: %s", IndexName, jsonProblem(err)))
		}
		return ks
	}
	ks, err := firstSidecars(sub)
	if err != nil {
		// The embedded files are checked by tests; a broken build is a programming error.
		panic(err)
	}
	return ks
})

// firstSidecars reads the first sidecar of each IMPL.KERNEL in fsys for its kernel's
// manifest.
func firstSidecars(fsys fs.FS) ([]Kernel, error) {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	var out []Kernel
	seen := map[string]bool{}
	for _, n := range names {
		if !isSidecar(n) {
			continue
		}
		impl, rest, _ := strings.Cut(n, ".")
		kernel, _, _ := strings.Cut(rest, ".")
		if seen[impl+"/"+kernel] {
			continue
		}
		seen[impl+"/"+kernel] = true
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		var k Kernel
		if err := json.Unmarshal(b, &k); err != nil {
			return nil, fmt.Errorf("kernel metadata %s: %s", n, jsonProblem(err))
		}
		if k.Impl != impl || k.Kernel != kernel {
			return nil, fmt.Errorf("kernel metadata %s describes %s/%s: a sidecar of symmem's is named IMPL.KERNEL.*.json", n, k.Impl, k.Kernel)
		}
		out = append(out, k)
	}
	sortKernels(out)
	return out, nil
}

// IndexName is the file in a directory of kernels that lists every kernel's manifest,
// as its first sidecar carries it (WriteIndex).
const IndexName = "manifests.json"

// WriteIndex writes dir's IndexName from its sidecars: the kernels' manifests in one
// file, which symmem reads for its own kernels when it starts instead of a sidecar a
// kernel.
func WriteIndex(dir string) error {
	ks, err := firstSidecars(os.DirFS(dir))
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(ks, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, IndexName), append(b, '\n'), 0o644)
}
