package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	embedded "github.com/symmem/symmem/kernels"
	"github.com/symmem/symmem/pkg/nvshmem"
)

// Param is one kernel parameter. Type is ptr, u64, i64 or i32.
type Param struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Hidden bool   `json:"hidden,omitempty"` // Triton's trailing scratch pointers
}

// Artifact is one compiled kernel for one target.
type Artifact struct {
	Impl               string  `json:"impl"`   // triton, cuda, sm-store
	Kernel             string  `json:"kernel"` // put_block, get_block, ...
	Entry              string  `json:"entry"`
	Params             []Param `json:"params"`
	NumWarps           int     `json:"num_warps"`
	BlockThreads       int     `json:"block_threads"` // fixed by the compile (Triton); 0 = chosen at launch
	Shared             int     `json:"shared"`
	GlobalScratchSize  int     `json:"global_scratch_size"`
	ProfileScratchSize int     `json:"profile_scratch_size"`
	Target             string  `json:"target"` // sm_90a, compute_80, ...
	Arch               int     `json:"arch"`
	Format             string  `json:"format"` // cubin or ptx
	UsesNVSHMEM        bool    `json:"uses_nvshmem"`
	TritonVersion      string  `json:"triton_version"`
	DeviceVersion      []int   `json:"nvshmem_device_version"`
	NCCLVersion        []int   `json:"nccl_version,omitempty"` // the NCCL headers an nccl-device kernel was built against
	SourceSHA256       string  `json:"source_sha256"`
	Sources            []string
	File               string `json:"file"`
	SHA256             string `json:"sha256"`
	// A kernel written for PyTorch's NVSHMEM module runs behind an entry of symmem's
	// signature: Wraps says how the entry calls it, NVSHMEMTriton whose module it was
	// built against, and Sizes the only message sizes it serves (its size is a
	// tl.constexpr; none: any size).
	Wraps         string  `json:"wraps,omitempty"`
	NVSHMEMTriton string  `json:"nvshmem_triton,omitempty"`
	Sizes         []int64 `json:"sizes,omitempty"`
	// Grid is the blocks it is launched with, as its author launched it (one for a
	// collective written for PyTorch's module, whose NVSHMEM collective one block
	// calls); 0: symmem's grid for the message. Cooperative says it is launched
	// cooperatively (cuLaunchCooperativeKernel: every block resident at once), as
	// PyTorch launches NVSHMEM's collectives.
	Grid        int  `json:"grid,omitempty"`
	Cooperative bool `json:"cooperative,omitempty"`
	// Peers says whom its puts reach: PeersAll for a put whose kernel puts to every
	// other rank itself (it computes its peers: PyTorch's puts in place to every peer),
	// which a sender launches once for all of them (run put --pattern one-to-all);
	// "": the peer it is given. PerPeer says such a kernel runs on symmem's grid times
	// the peers, a block per chunk and peer (its program id picks the peer too).
	Peers   string `json:"peers,omitempty"`
	PerPeer bool   `json:"per_peer,omitempty"`
	// InPlace says its puts send its buffer into the same place on the peer (PyTorch's
	// puts in place): its entry first puts this rank's src into its own dst and sends
	// dst, so a rank that runs it must not receive into dst too (no ring).
	InPlace bool `json:"in_place,omitempty"`
	// Ranks are the only job sizes it serves (its world size is a tl.constexpr, built
	// for these); none: any.
	Ranks []int `json:"ranks,omitempty"`
	// Unit is what every message it moves must be a whole number of, in bytes (a
	// put-flag kernel whose puts share one element count: the puts times the
	// element's size); 0: any.
	Unit int64 `json:"unit,omitempty"`
	// MaxElems is the most elements it serves in one call, where it was written for one
	// block of a tl.constexpr size (a get-add kernel whose tl.arange spans the block):
	// MaxElemsConst names that constexpr, which --const sets at build time; 0: any.
	MaxElems      int64  `json:"max_elems,omitempty"`
	MaxElemsConst string `json:"max_elems_const,omitempty"`
	// Link names the device libraries relocatable PTX is linked with when it is loaded
	// (DeviceArchive: PTX calling NVSHMEM); none for a cubin, which the build linked.
	Link []string `json:"link,omitempty"`
	// Tile is a matrix kernel's tile, as it was built: rows, columns and K step (a
	// fused matrix product's; the host sizes its grid by it).
	Tile []int `json:"tile,omitempty"`
	// Manifest is what the kernel serves, with which element type, operators and warp
	// counts, as its source's manifest declares it (symmem's own kernels).
	Manifest

	fsys fs.FS
	dir  string // the user's directory it was read from; "" = embedded
}

// Catalog is a set of artifacts.
type Catalog struct {
	Artifacts []*Artifact
	// Dir is the user's directory the catalogue was read from (LoadDir); "" for the
	// catalogue embedded in the binary.
	Dir  string
	fsys fs.FS
	// first is each kernel's first artifact, by implementation and name (Load): what
	// ManifestOf answers from without a search, as a launch asks it.
	first map[[2]string]*Artifact
}

var (
	defaultOnce sync.Once
	defaultCat  *Catalog
	defaultErr  error
)

// DirEnv names a directory of symmem's own kernels (the output directory of
// scripts/build-kernels.sh) to use instead of the ones embedded in the binary: how
// kernels just built on a GPU machine are tried there before they are committed, with
// a binary built elsewhere.
const DirEnv = "SYMMEM_KERNELS_DIR"

// defaultNote says why Default took the embedded kernels over DirEnv's ("": it did
// not, or DirEnv is unset).
var defaultNote string

// DefaultNote is what a program should tell its user about Default's catalogue: that
// DirEnv names no usable kernels ("" where there is nothing to say). The package prints
// nothing itself: a job's ranks load the catalogue too, and its launcher says it once.
func DefaultNote() string {
	if os.Getenv(DirEnv) == "" {
		return ""
	}
	Default()
	return defaultNote
}

// Default is the catalogue embedded in this binary, or the one in $SYMMEM_KERNELS_DIR;
// a directory there that holds no usable kernels is named once on stderr, and the
// embedded ones are used. It is read once per process.
func Default() *Catalog {
	defaultOnce.Do(func() {
		if dir := os.Getenv(DirEnv); dir != "" {
			c, err := Load(os.DirFS(dir))
			if err == nil && len(c.Artifacts) > 0 {
				defaultCat = c
				return
			}
			why := "no kernel sidecars (*.json) in it"
			if st, serr := os.Stat(dir); serr != nil {
				why = serr.Error()
			} else if !st.IsDir() {
				why = "it is no directory"
			} else if err != nil {
				why = err.Error()
			}
			defaultNote = fmt.Sprintf("%s=%s holds no usable kernels (%s); using the kernels built into this binary", DirEnv, dir, why)
		}
		sub, _ := fs.Sub(embedded.FS, "build")
		defaultCat, defaultErr = Load(sub)
	})
	if defaultErr != nil {
		// The embedded files are checked by tests; a broken build is a programming error.
		panic(defaultErr)
	}
	return defaultCat
}

// isSidecar says whether the JSON file name in a directory of kernels is a kernel's
// sidecar: not the index of manifests (IndexName) nor a user's build record
// (NAME.build.json, symmem kernels build's).
func isSidecar(name string) bool {
	return name != IndexName && !strings.HasSuffix(name, ".build.json")
}

// Load reads every *.json sidecar in fsys.
func Load(fsys fs.FS) (*Catalog, error) {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	c := &Catalog{fsys: fsys}
	for _, n := range names {
		if !isSidecar(n) {
			continue
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		var a Artifact
		if err := json.Unmarshal(b, &a); err != nil {
			return nil, fmt.Errorf("kernel metadata %s: %s", n, jsonProblem(err))
		}
		a.fsys = fsys
		c.Artifacts = append(c.Artifacts, &a)
	}
	sort.Slice(c.Artifacts, func(i, j int) bool {
		return c.Artifacts[i].File+c.Artifacts[i].Entry < c.Artifacts[j].File+c.Artifacts[j].Entry
	})
	c.first = map[[2]string]*Artifact{}
	for _, a := range c.Artifacts {
		if k := [2]string{a.Impl, a.Kernel}; c.first[k] == nil {
			c.first[k] = a
		}
	}
	return c, nil
}

// Hash identifies the catalogue: the sha256 of its artifacts' hashes, sorted, in hex.
// Results record it, and `symmem version` shows it.
func (c *Catalog) Hash() string {
	var sums []string
	for _, a := range c.Artifacts {
		sums = append(sums, a.SHA256)
	}
	slices.Sort(sums)
	h := sha256.Sum256([]byte(strings.Join(sums, "\n")))
	return hex.EncodeToString(h[:])
}

// Summary describes the catalogue in a line, for `symmem version`: 361 artifacts,
// Triton 3.6.0, NVSHMEM device library 3.4.5, targets [sm_80 sm_90a].
func (c *Catalog) Summary() string {
	return fmt.Sprintf("%d artifacts, Triton %s, NVSHMEM device library %s, targets %v",
		len(c.Artifacts), c.TritonVersion(), c.DeviceVersion(), c.Targets())
}

// Data returns the artifact's bytes (PTX gets the NUL that cuModuleLoadData needs),
// decompressed where they are stored compressed: each call reads them anew, so a
// caller keeps what it loaded.
func (a *Artifact) Data() ([]byte, error) {
	b, err := a.body()
	if err != nil {
		return nil, err
	}
	if a.Format == "ptx" {
		b = append(b, 0)
	}
	return b, nil
}

// Verify checks the artifact's bytes against the hash its metadata records.
func (a *Artifact) Verify() error {
	b, err := a.body()
	if err != nil {
		return err
	}
	return a.check(b)
}

// Name is how messages refer to the artifact: triton/put_block w32 sm_90a.
func (a *Artifact) Name() string {
	s := a.Impl + "/" + a.Kernel
	if a.NumWarps > 0 {
		s += fmt.Sprintf(" w%d", a.NumWarps)
	}
	return s + " " + a.Target
}

// TritonVersion is the Triton the artifacts were built with.
func (c *Catalog) TritonVersion() string {
	for _, a := range c.Artifacts {
		if a.TritonVersion != "" {
			return a.TritonVersion
		}
	}
	return "none"
}

// DeviceVersion is the NVSHMEM device library the artifacts were built against.
func (c *Catalog) DeviceVersion() string {
	for _, a := range c.Artifacts {
		if len(a.DeviceVersion) == 3 {
			return fmt.Sprintf("%d.%d.%d", a.DeviceVersion[0], a.DeviceVersion[1], a.DeviceVersion[2])
		}
	}
	return "none"
}

// Targets lists the distinct targets.
func (c *Catalog) Targets() []string {
	seen := map[string]bool{}
	var ts []string
	for _, a := range c.Artifacts {
		if !seen[a.Target] {
			seen[a.Target] = true
			ts = append(ts, a.Target)
		}
	}
	sort.Strings(ts)
	return ts
}

// Warps lists the warp counts an implementation's kernel was compiled for (Triton);
// nil means the block size is chosen at launch.
func (c *Catalog) Warps(impl, kernel string) []int {
	seen := map[int]bool{}
	var ws []int
	for _, a := range c.Artifacts {
		if a.Impl == impl && a.Kernel == kernel && a.NumWarps > 0 && !seen[a.NumWarps] {
			seen[a.NumWarps] = true
			ws = append(ws, a.NumWarps)
		}
	}
	sort.Ints(ws)
	return ws
}

// runsOn reports whether a cubin for target arch runs on a GPU of compute capability cc
// (major*10+minor): an arch-specific cubin (sm_90a) only on that exact chip, a plain one
// on the same major at an equal or later minor.
func runsOn(a *Artifact, cc int) bool {
	if strings.HasSuffix(a.Target, "a") {
		return a.Arch == cc
	}
	return a.Arch/10 == cc/10 && a.Arch <= cc
}

// DeviceArchive is NVSHMEM's device library as an archive, installed beside its host
// library (lib/ of the pip wheel or of a package): what relocatable PTX calling
// NVSHMEM is linked with at load.
const DeviceArchive = "libnvshmem_device.a"

// ErrNoPTX is wrapped by SelectPTX's error for a kernel that has no PTX the GPU can
// load.
var ErrNoPTX = errors.New("no PTX")

// Select picks the artifact of impl/kernel for a GPU of compute capability cc
// (major*10+minor: 90 for an H100 or H200): a cubin that runs on it first (sm_90a only
// on sm_90; sm_80 on any 8.x of 8.0 or later), PTX of an older target, which the driver
// compiles at load, second. warps = 0 takes the largest warp count built; another
// count must be one built, or the error is a *WarpsError.
func (c *Catalog) Select(impl, kernel string, warps, cc int) (*Artifact, error) {
	return c.pick(impl, kernel, warps, cc, false)
}

// SelectPTX is Select taking only PTX, even where a cubin runs on the GPU: how a check
// on today's GPUs exercises the path a newer GPU takes. A kernel without PTX the GPU
// can use is an error.
func (c *Catalog) SelectPTX(impl, kernel string, warps, cc int) (*Artifact, error) {
	return c.pick(impl, kernel, warps, cc, true)
}

func (c *Catalog) pick(impl, kernel string, warps, cc int, ptxOnly bool) (*Artifact, error) {
	var cubin, ptx *Artifact
	found := false
	for _, a := range c.Artifacts {
		if a.Impl != impl || a.Kernel != kernel {
			continue
		}
		found = true
		if warps > 0 && a.NumWarps > 0 && a.NumWarps != warps {
			continue
		}
		better := func(cur *Artifact) bool { return cur == nil || a.NumWarps > cur.NumWarps || a.Arch > cur.Arch }
		switch {
		case a.Format == "cubin" && runsOn(a, cc) && better(cubin):
			cubin = a
		case a.Format == "ptx" && a.Arch <= cc && better(ptx):
			ptx = a
		}
	}
	where, build := "this binary", "scripts/build-kernels.sh"
	if c.Dir != "" {
		where, build = c.Dir, "symmem kernels build FILE.py"
	}
	if !found {
		return nil, fmt.Errorf("no %s kernel %q in %s: it is not in the catalogue; rebuild with %s", impl, kernel, where, build)
	}
	if ptx != nil && (ptxOnly || cubin == nil) {
		return ptx, nil
	}
	if cubin != nil && !ptxOnly {
		return cubin, nil
	}
	if ws := c.Warps(impl, kernel); warps > 0 && len(ws) > 0 && !contains(ws, warps) {
		return nil, &WarpsError{Impl: impl, Kernel: kernel, Want: warps, Have: ws}
	}
	if ptxOnly {
		var targets []string
		for _, a := range c.Artifacts {
			if a.Impl == impl && a.Kernel == kernel && !slices.Contains(targets, a.Target) {
				targets = append(targets, a.Target)
			}
		}
		slices.Sort(targets)
		return nil, fmt.Errorf("%w: %s/%s in %s has %s, and none is PTX for sm_%d", ErrNoPTX, impl, kernel, where, strings.Join(targets, ", "), cc)
	}
	return nil, fmt.Errorf("no %s/%s kernel for sm_%d: %s has %s and no PTX it can use; rebuild with %s --arch %d",
		impl, kernel, cc, where, strings.Join(c.Targets(), ", "), build, cc)
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// WarpsError is a kernel asked for with a warp count it was not compiled for (Triton
// fixes the block size at compile time).
type WarpsError struct {
	Impl, Kernel string
	Want         int
	Have         []int
	// Setting is the caller's name for the warp count, for the remedy ("--warps" in
	// symmem's CLI); "" leaves it out.
	Setting string
}

func (e *WarpsError) Error() string {
	with := ""
	if e.Setting != "" {
		with = " with " + e.Setting
	}
	return fmt.Sprintf("%s/%s was built for %v warps, not %d: pick one of those%s", e.Impl, e.Kernel, e.Have, e.Want, with)
}

// BuiltAgainst says which device library the artifact's code was built against:
// NVSHMEM's device library, NCCL's device API, or neither.
func (a *Artifact) BuiltAgainst() string {
	switch {
	case a.UsesNVSHMEM && len(a.DeviceVersion) == 3:
		return fmt.Sprintf("NVSHMEM device library %d.%d.%d", a.DeviceVersion[0], a.DeviceVersion[1], a.DeviceVersion[2])
	case len(a.NCCLVersion) == 3:
		return fmt.Sprintf("NCCL %d.%d.%d device API", a.NCCLVersion[0], a.NCCLVersion[1], a.NCCLVersion[2])
	}
	return "no device library"
}

// CheckHost returns an error when a host library of version host cannot serve the
// artifact (nvshmem.Version.Serves).
func (a *Artifact) CheckHost(host nvshmem.Version) error {
	if !a.UsesNVSHMEM || len(a.DeviceVersion) != 3 {
		return nil
	}
	d := a.DeviceVersion
	if !host.Serves(nvshmem.Version{d[0], d[1], d[2]}) {
		return fmt.Errorf("kernel %s was built against NVSHMEM device library %d.%d.%d, which host library %d.%d.%d cannot serve (needs major %d and minor >= %d): install NVSHMEM %d.%d or newer %d.x, or rebuild the kernels with scripts/build-kernels.sh",
			a.Name(), d[0], d[1], d[2], host[0], host[1], host[2], d[0], d[1], d[0], d[1], d[0])
	}
	return nil
}

// Takes says whether the kernel has a visible parameter called name.
func (a *Artifact) Takes(name string) bool {
	for _, p := range a.Params {
		if p.Name == name && !p.Hidden {
			return true
		}
	}
	return false
}

// Args packs values for the kernel's visible parameters, in order, and appends Triton's
// hidden scratch pointers (null: the kernels here need no scratch). Each parameter gets
// one 64-bit slot, whatever its type: the driver reads 4 bytes for an i32, which on a
// little-endian host is the value itself, so the launcher needs no per-type packing.
func (a *Artifact) Args(vals ...uint64) ([]uint64, error) {
	visible := 0
	for _, p := range a.Params {
		if !p.Hidden {
			visible++
		}
	}
	if len(vals) != visible {
		return nil, fmt.Errorf("kernel %s takes %d arguments, got %d", a.Name(), visible, len(vals))
	}
	if a.GlobalScratchSize > 0 || a.ProfileScratchSize > 0 {
		return nil, fmt.Errorf("kernel %s needs scratch memory, which symmem does not provide", a.Name())
	}
	args := make([]uint64, 0, len(a.Params))
	i := 0
	for _, p := range a.Params {
		var v uint64
		if !p.Hidden {
			v = vals[i]
			i++
		}
		args = append(args, v)
	}
	return args, nil
}

// Path is the artifact's file inside the catalogue as its sidecar names it, for
// messages (its body may be stored compressed beside it, PATH.zst).
func (a *Artifact) Path() string {
	if a.dir != "" {
		return filepath.Join(a.dir, a.File)
	}
	return path.Join("kernels/build", a.File)
}

// jsonProblem says what is wrong with a sidecar in the file's terms, not the decoder's
// ("field arch holds a string, want a number", not "Go struct field Artifact.arch").
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field == "":
		return fmt.Sprintf("it holds %s, want %s", jsonKind(te.Value), jsonKind(goKind(te.Type.Kind().String())))
	case errors.As(err, &te):
		return fmt.Sprintf("field %s holds %s, want %s", te.Field, jsonKind(te.Value), jsonKind(goKind(te.Type.Kind().String())))
	case errors.As(err, &se):
		return fmt.Sprintf("not JSON at byte %d", se.Offset)
	}
	return "not complete JSON"
}

// jsonKind names a JSON value's kind (the decoder's "array", or goKind's "list") with
// its article.
func jsonKind(k string) string {
	switch k {
	case "array", "list":
		return "a list"
	case "object":
		return "an object"
	case "bool":
		return "true or false"
	}
	return "a " + k
}

func goKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"), strings.HasPrefix(k, "float"):
		return "number"
	case k == "slice" || k == "array":
		return "list"
	case k == "struct" || k == "map":
		return "object"
	}
	return k
}
