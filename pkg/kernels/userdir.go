package kernels

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/symmem/symmem/internal/input"
	"github.com/symmem/symmem/internal/lazyre"
)

// rebuild is the remedy every refusal of a user's artifact ends with.
const rebuild = "rebuild it with symmem kernels build FILE.py --out DIR"

// LoadDir reads a directory of user artifacts (what `symmem kernels build` writes:
// *.cubin or *.ptx, each with a .json sidecar; a body may be stored compressed,
// FILE.zst, as symmem kernels pack leaves it) and checks everything that can be
// checked without a GPU: that each sidecar parses and names its kernel, impl, target
// and format; that the binary is there with the hash the sidecar records; that the
// kernel takes symmem's parameters; and, where the sources the sidecar names lie in
// the directory too, that they are the ones it was built from. Every bad artifact is
// named; whether a GPU here can load them is CheckHost's and LoadsOn's to say.
func LoadDir(dir string) (*Catalog, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("kernel directory %s: %w: give the --out directory of symmem kernels build", dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("kernel directory %s is a file, not a directory of kernels: give the --out directory of symmem kernels build", dir)
	}
	fsys := os.DirFS(dir)
	var names []string
	for _, pat := range []string{"*.cubin.json", "*.ptx.json"} {
		m, _ := fs.Glob(fsys, pat)
		names = append(names, m...)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("kernel directory %s holds no kernel sidecars (*.cubin.json, *.ptx.json): build some with symmem kernels build FILE.py --out %s", dir, dir)
	}
	sort.Strings(names)
	c := &Catalog{fsys: fsys, Dir: dir}
	var errs []error
	for _, n := range names {
		a, err := loadUser(fsys, dir, n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.Artifacts = append(c.Artifacts, a)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// loadUser reads and checks one sidecar.
func loadUser(fsys fs.FS, dir, name string) (*Artifact, error) {
	where := filepath.Join(dir, name)
	var pe *fs.PathError
	if err := input.Check(where, maxSidecar); err != nil && !errors.As(err, &pe) {
		return nil, fmt.Errorf("%v: remove it or %s", err, rebuild) // a pipe, a device, too large
	}
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		if to, lerr := os.Readlink(where); lerr == nil && errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s is a link to %s, which does not exist: remove the link or %s", where, to, rebuild)
		}
		return nil, fmt.Errorf("%s: %v: %s", where, errors.Unwrap(err), rebuild)
	}
	var a Artifact
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("%s is not a kernel sidecar (%s): %s", where, jsonProblem(err), rebuild)
	}
	a.fsys, a.dir = fsys, dir
	var missing []string
	for _, f := range []struct {
		name string
		bad  bool
	}{{"impl", a.Impl == ""}, {"kernel", a.Kernel == ""}, {"entry", a.Entry == ""}, {"file", a.File == ""},
		{"target", a.Target == ""}, {"arch", a.Arch <= 0}, {"sha256", a.SHA256 == ""}, {"params", len(a.Params) == 0}} {
		if f.bad {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s lacks %s: %s", where, strings.Join(missing, ", "), rebuild)
	}
	if err := a.checkSense(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", where, err, rebuild)
	}
	if a.Format != "cubin" && a.Format != "ptx" {
		return nil, fmt.Errorf("%s: format %q, want cubin or ptx: %s", where, a.Format, rebuild)
	}
	if a.Format == "ptx" && a.Arch >= 90 {
		// Triton's PTX for sm_90 and later targets sm_90a (arch-specific): no other GPU
		// would load it, whatever the sidecar says.
		return nil, fmt.Errorf("%s: PTX for sm_%d is arch-specific (.target sm_%da) and loads on no other GPU; symmem keeps PTX for sm_80 only: %s", where, a.Arch, a.Arch, rebuild)
	}
	for _, l := range a.Link {
		if a.Format != "ptx" || l != DeviceArchive {
			return nil, fmt.Errorf("%s: link %q: symmem links only PTX, and only with %s: %s", where, l, DeviceArchive, rebuild)
		}
		if !a.UsesNVSHMEM {
			// Linked with the device library, its device state is NVSHMEM's to fill
			// in, which symmem asks only of kernels that say they use it.
			return nil, fmt.Errorf("%s: links %s but says it does not use NVSHMEM (uses_nvshmem): %s", where, l, rebuild)
		}
	}
	if a.UsesNVSHMEM && len(a.DeviceVersion) != 3 {
		return nil, fmt.Errorf("%s: nvshmem_device_version %v is not MAJOR.MINOR.PATCH: %s", where, a.DeviceVersion, rebuild)
	}
	if a.File != filepath.Base(a.File) {
		return nil, fmt.Errorf("%s: file %q must lie beside its sidecar", where, a.File)
	}
	if err := a.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	stored, err := a.stored()
	if err != nil {
		return nil, fmt.Errorf("%s: its kernel %s is not in %s: copy it there or %s", where, a.File, dir, rebuild)
	}
	if err := input.Check(filepath.Join(dir, stored), maxKernel); err != nil {
		return nil, fmt.Errorf("%s: its kernel %v: %s", where, err, rebuild)
	}
	b, err = a.body()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := a.check(b); err != nil {
		return nil, fmt.Errorf("%s: %w: the file changed after the build; %s", where, err, rebuild)
	}
	if err := a.checkSources(dir); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return &a, nil
}

// nameRE is what an implementation's name may be: the sidecar's impl becomes --impl
// NAME, is printed in tables and names files, so one from a hand-edited sidecar is held
// to it as kernels build --name is. variantRE is a name with the values of the
// tl.constexprs its kernels were built for (kernels build --const nbi=0,1 writes
// NAME[nbi=0] and NAME[nbi=1]), and the function of a file's second kernel for one
// operation (NAME[fn=my_put_quiet_kernel]).
var (
	nameRE    = lazyre.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)
	variantRE = lazyre.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}(\[[A-Za-z_][A-Za-z0-9_]{0,63}=[A-Za-z0-9_.+-]{1,64}\]){0,8}$`)
)

// ValidName says whether name may name a user's implementation (kernels build --name,
// a sidecar's impl): lower-case letters, digits and dashes, not starting with a dash,
// at most 64 characters.
func ValidName(name string) bool { return nameRE().MatchString(name) }

// entryRE is a C identifier, what a cubin's entry point is.
var entryRE = lazyre.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`)

// checkSense refuses a sidecar's names and numbers that no build writes: a name that
// is not one (a path, a comma, a terminal escape) or a warp count no GPU runs.
func (a *Artifact) checkSense() error {
	switch {
	case !variantRE().MatchString(a.Impl):
		return fmt.Errorf("impl %s is not a name: want lower-case letters, digits and dashes, as kernels build --name takes, then a [CONST=VALUE] for each --const", input.Quote(a.Impl))
	case !entryRE().MatchString(a.Entry):
		return fmt.Errorf("entry %s is not a function name", input.Quote(a.Entry))
	case !entryRE().MatchString(a.Kernel):
		return fmt.Errorf("kernel %s is not a function name", input.Quote(a.Kernel))
	case !targetRE().MatchString(a.Target):
		return fmt.Errorf("target %s: want sm_NN, sm_NNa or compute_NN", input.Quote(a.Target))
	case a.NumWarps < 0 || a.NumWarps > 32 || a.NumWarps&(a.NumWarps-1) != 0:
		return fmt.Errorf("num_warps %d: want a power of two from 1 to 32", a.NumWarps)
	case a.Grid < 0 || a.Grid > maxGrid:
		return fmt.Errorf("grid %d: want 0 (symmem's grid) to %d blocks", a.Grid, maxGrid)
	case a.Peers != "" && a.Kernel != table().opKernels["put"]:
		return fmt.Errorf("peers %s: only a put kernel (%s) reaches its peers by itself, not %s", input.Quote(a.Peers), table().opKernels["put"], a.Kernel)
	case a.Peers != "" && a.Peers != PeersAll:
		return fmt.Errorf("peers %s: want %q (its puts reach every other rank) or none (the peer it is given)", input.Quote(a.Peers), PeersAll)
	case a.PerPeer && (a.Peers != PeersAll || a.Grid != 0):
		return fmt.Errorf("per_peer: a block per chunk and peer is for a kernel on symmem's grid whose puts reach every peer (peers %q, no grid)", PeersAll)
	case slices.ContainsFunc(a.Ranks, func(n int) bool { return n < 2 }):
		return fmt.Errorf("ranks %v: want job sizes of 2 ranks or more", a.Ranks)
	case a.BlockThreads < 0 || a.BlockThreads > 1024 || a.Shared < 0 || a.GlobalScratchSize < 0 || a.ProfileScratchSize < 0:
		return fmt.Errorf("block_threads %d, shared %d, scratch %d/%d: want 0 to 1024 threads and no negative size",
			a.BlockThreads, a.Shared, a.GlobalScratchSize, a.ProfileScratchSize)
	}
	return nil
}

// maxGrid bounds a sidecar's grid: the blocks a collective's signal words hold.
const maxGrid = 128

var targetRE = lazyre.MustCompile(`^(sm_[0-9]{2,3}[a-z]?|compute_[0-9]{2,3}[a-z]?)$`)

// The most a user's kernel directory's files may hold: far above what a build writes
// (a sidecar of a few kilobytes, a cubin or PTX of a few megabytes), far below what
// would exhaust memory.
const (
	maxSidecar = 1 << 20
	maxKernel  = 256 << 20
	maxSource  = 16 << 20
)

// checkSources compares source_sha256 with the sources beside the artifact, when every
// one of them is there (a directory copied without its sources is not refused).
func (a *Artifact) checkSources(dir string) error {
	if len(a.Sources) == 0 || a.SourceSHA256 == "" {
		return nil
	}
	files := map[string][]byte{}
	for _, s := range a.Sources {
		var pe *fs.PathError
		if err := input.Check(filepath.Join(dir, filepath.Base(s)), maxSource); err != nil && !errors.As(err, &pe) {
			return fmt.Errorf("kernel %s: its source %v: remove it or %s", a.Name(), err, rebuild)
		}
		b, err := fs.ReadFile(a.fsys, filepath.Base(s))
		if err != nil {
			return nil
		}
		files[filepath.Base(s)] = b
	}
	if got := sourcesHash(files); got != a.SourceSHA256 {
		return fmt.Errorf("kernel %s: the sources in %s (%s) have sha256 %s, the kernel was built from %s: the source changed since the build; %s",
			a.Name(), dir, strings.Join(a.Sources, ", "), got[:12], short(a.SourceSHA256), rebuild)
	}
	return nil
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
