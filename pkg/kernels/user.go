package kernels

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/symmem/symmem/internal/input"
)

// Signatures are the kernels symmem launches and the parameters each takes, in order:
// the contract a user's kernel must follow (docs/kernels.md). Every data kernel gets
// the whole message (nbytes) and the chunk the launcher gives each block (program);
// the grid is ceil(nbytes / chunk) blocks. A kernel may ignore chunk and split the
// message its own way, as long as the grid's blocks together move every byte.
var Signatures = map[string][]Param{
	"put_block":        {{Name: "dst", Type: "ptr"}, {Name: "src", Type: "ptr"}, {Name: "nbytes", Type: "i64"}, {Name: "chunk", Type: "i64"}, {Name: "peer", Type: "i32"}},
	"get_block":        {{Name: "dst", Type: "ptr"}, {Name: "src", Type: "ptr"}, {Name: "nbytes", Type: "i64"}, {Name: "chunk", Type: "i64"}, {Name: "peer", Type: "i32"}},
	"put_signal_block": {{Name: "dst", Type: "ptr"}, {Name: "src", Type: "ptr"}, {Name: "nbytes", Type: "i64"}, {Name: "chunk", Type: "i64"}, {Name: "sig", Type: "ptr"}, {Name: "peer", Type: "i32"}},
	"wait_signal":      {{Name: "sig", Type: "ptr"}, {Name: "value", Type: "u64"}},
	"pingpong": {{Name: "dst", Type: "ptr"}, {Name: "src", Type: "ptr"}, {Name: "sig", Type: "ptr"}, {Name: "nbytes", Type: "i64"},
		{Name: "iters", Type: "i32"}, {Name: "peer", Type: "i32"}, {Name: "initiator", Type: "i32"}, {Name: "stamps", Type: "ptr"}},
	// A user's collectives: see collParams.
	"all_reduce_bf16":     collParams,
	"all_reduce_f32":      collParams,
	"reduce_scatter_bf16": collParams,
	"reduce_scatter_f32":  collParams,
	"all_gather":          collParams,
	"all_to_all":          collParams,
	"broadcast":           append(slices.Clip(collParams), Param{Name: "root", Type: "i32"}),
	// A user's MoE dispatch and combine: see moeParams.
	"moe_dispatch":     moeParams,
	"moe_combine_bf16": moeParams,
	"moe_combine_f32":  moeParams,
}

// collParams are what a user's collective kernel takes: every rank's send, recv and
// scratch (symmetric), nelem (the elements of one rank's share: the whole message of
// all-reduce and broadcast, each rank's block of reduce-scatter's output, of
// all-gather's input and of all-to-all's exchange; bytes for the ops that only move
// data), sig (n u64 words per block, for up to 128 blocks, zero before the job's first
// user collective and written only by the kernels), seq (1, 2, 3, ...: this rank's
// launches of user collectives, the same on every rank at the same launch, so a
// signal of the value seq is this launch's and no earlier one's), this rank and the
// number of ranks; broadcast's root last. scratch holds 2 x n x nelem elements: a slot
// per rank in two halves that launches can alternate.
var collParams = []Param{{Name: "send", Type: "ptr"}, {Name: "recv", Type: "ptr"}, {Name: "scratch", Type: "ptr"}, {Name: "nelem", Type: "i64"},
	{Name: "sig", Type: "ptr"}, {Name: "seq", Type: "i64"}, {Name: "me", Type: "i32"}, {Name: "n", Type: "i32"}}

// moeParams are what a user's MoE dispatch and combine kernels take: every rank's send,
// recv and scratch (symmetric); slots, this rank's routing table (tokens x n int32 in
// device memory of the rank's own: slots[t*n + d] is the slot of this rank's token t on
// rank d, -1 where t does not go to d); origin, the other direction (nslots pairs of
// int32: the rank and token whose copy slot j of this rank holds); tokens per rank;
// nslots, the copies this rank receives; hidden, the elements of a token (bytes for
// dispatch, which only moves data); then sig, seq, me and n as collParams. Dispatch
// puts token t of rank s into slot slots_s[t*n + d] of rank d's recv; combine sums
// into token t of rank s's recv the copy at slot slots_s[t*n + d] of every rank d's
// send. scratch holds 2 x n x tokens x hidden elements.
var moeParams = []Param{{Name: "send", Type: "ptr"}, {Name: "recv", Type: "ptr"}, {Name: "scratch", Type: "ptr"},
	{Name: "slots", Type: "ptr"}, {Name: "origin", Type: "ptr"}, {Name: "tokens", Type: "i64"}, {Name: "nslots", Type: "i64"}, {Name: "hidden", Type: "i64"},
	{Name: "sig", Type: "ptr"}, {Name: "seq", Type: "i64"}, {Name: "me", Type: "i32"}, {Name: "n", Type: "i32"}}

// CollKernels are the kernels of a user's collectives, by operation: the reducing ones
// one per element type (bf16, float32), the others one that moves bytes.
var CollKernels = map[string][]string{
	"all-reduce": {"all_reduce_bf16", "all_reduce_f32"}, "reduce-scatter": {"reduce_scatter_bf16", "reduce_scatter_f32"},
	"all-gather": {"all_gather"}, "all-to-all": {"all_to_all"}, "broadcast": {"broadcast"},
	"dispatch": {"moe_dispatch"}, "combine": {"moe_combine_bf16", "moe_combine_f32"},
}

// Bounded are the parameters a kernel that waits on a peer (wait_signal, pingpong) may
// take after its signature: symmem then passes the job's wait limit in nanoseconds and
// the address of the rank's mailbox, and the kernel gives up on the device, reporting
// in the mailbox and trapping, rather than wait past the limit (docs/kernels.md).
// Symmem's own wait kernels and collective kernels all take them.
var Bounded = []Param{{Name: "limit_ns", Type: "u64"}, {Name: "mailbox", Type: "ptr"}}

// waits are the kernels that may take Bounded.
var waits = map[string]bool{"wait_signal": true, "pingpong": true, "all_reduce_bf16": true, "all_reduce_f32": true,
	"reduce_scatter_bf16": true, "reduce_scatter_f32": true, "all_gather": true, "all_to_all": true, "broadcast": true,
	"moe_dispatch": true, "moe_combine_bf16": true, "moe_combine_f32": true}

// OpKernels maps the operation names a user declares kernels under (SYMMEM_KERNELS in
// the file, --op on the command line) to the kernel names of the catalogue.
var OpKernels = map[string]string{
	"put": "put_block", "get": "get_block", "put-signal": "put_signal_block", "latency": "pingpong", "wait-signal": "wait_signal",
	"all-reduce": "all_reduce_bf16", "all-reduce:float32": "all_reduce_f32",
	"reduce-scatter": "reduce_scatter_bf16", "reduce-scatter:float32": "reduce_scatter_f32",
	"all-gather": "all_gather", "all-to-all": "all_to_all", "broadcast": "broadcast",
	"dispatch": "moe_dispatch", "combine": "moe_combine_bf16", "combine:float32": "moe_combine_f32",
}

// hiddenParams are Triton's trailing scratch pointers, which symmem passes as null.
var hiddenParams = []string{"global_scratch", "profile_scratch"}

// CheckSignature says whether the artifact takes the parameters symmem passes to its
// kernel, naming the first one that does not fit.
func (a *Artifact) CheckSignature() error {
	want, ok := Signatures[a.Kernel]
	if !ok {
		return fmt.Errorf("kernel %s: symmem launches no kernel %q: name it one of %s", a.Name(), a.Kernel, strings.Join(kernelNames(), ", "))
	}
	var visible []Param
	for i, p := range a.Params {
		if p.Hidden {
			// Only Triton's scratch pointers may be hidden, and only at the end.
			if k := i - len(visible); k >= len(hiddenParams) || p.Name != hiddenParams[k] || p.Type != "ptr" {
				return fmt.Errorf("kernel %s: hidden parameter %q (%s) is not one of Triton's trailing scratch pointers %v", a.Name(), p.Name, p.Type, hiddenParams)
			}
			continue
		}
		if len(visible) < i {
			return fmt.Errorf("kernel %s: parameter %q comes after Triton's hidden scratch pointers", a.Name(), p.Name)
		}
		visible = append(visible, p)
	}
	sig := signatureString(a.Kernel)
	for i, w := range want {
		if i >= len(visible) {
			return fmt.Errorf("kernel %s: parameter %q (%s) is missing: %s takes %s", a.Name(), w.Name, w.Type, a.Kernel, sig)
		}
		if p := visible[i]; p.Name != w.Name || p.Type != w.Type {
			return fmt.Errorf("kernel %s: parameter %d is %q (%s), symmem passes %q (%s) there: %s takes %s", a.Name(), i+1, p.Name, p.Type, w.Name, w.Type, a.Kernel, sig)
		}
	}
	if waits[a.Kernel] && len(visible) == len(want)+len(Bounded) &&
		visible[len(want)] == Bounded[0] && visible[len(want)+1] == Bounded[1] {
		visible = visible[:len(want)]
	}
	if len(visible) > len(want) {
		p := visible[len(want)]
		return fmt.Errorf("kernel %s: parameter %q (%s) is one symmem does not pass: %s takes %s", a.Name(), p.Name, p.Type, a.Kernel, sig)
	}
	if a.GlobalScratchSize > 0 || a.ProfileScratchSize > 0 {
		return fmt.Errorf("kernel %s needs %d bytes of global and %d of profile scratch, which symmem does not provide", a.Name(), a.GlobalScratchSize, a.ProfileScratchSize)
	}
	return nil
}

// UserOps are the operations a user's file can declare kernels for, in the order the
// docs give them.
func UserOps() []string {
	return []string{"put", "get", "put-signal", "latency", "wait-signal", "all-reduce", "all-reduce:float32",
		"reduce-scatter", "reduce-scatter:float32", "all-gather", "all-to-all", "broadcast", "dispatch", "combine", "combine:float32"}
}

func kernelNames() []string {
	var ks []string
	for k := range Signatures {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// signatureString is how messages show a kernel's signature: (dst, src, nbytes, chunk, peer).
func signatureString(kernel string) string {
	var names []string
	for _, p := range Signatures[kernel] {
		names = append(names, p.Name)
	}
	return "(" + strings.Join(names, ", ") + ")"
}

// rebuild is the remedy every refusal of a user's artifact ends with.
const rebuild = "rebuild it with symmem kernels build FILE.py --out DIR"

// LoadDir reads a directory of user artifacts (what `symmem kernels build` writes:
// *.cubin or *.ptx, each with a .json sidecar) and checks everything that can be
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
	if a.UsesNVSHMEM && len(a.DeviceVersion) != 3 {
		return nil, fmt.Errorf("%s: nvshmem_device_version %v is not MAJOR.MINOR.PATCH: %s", where, a.DeviceVersion, rebuild)
	}
	if a.File != filepath.Base(a.File) {
		return nil, fmt.Errorf("%s: file %q must lie beside its sidecar", where, a.File)
	}
	if err := a.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if _, err := fs.Stat(fsys, a.File); err != nil {
		return nil, fmt.Errorf("%s: its kernel %s is not in %s: copy it there or %s", where, a.File, dir, rebuild)
	}
	if err := input.Check(filepath.Join(dir, a.File), maxKernel); err != nil {
		return nil, fmt.Errorf("%s: its kernel %v: %s", where, err, rebuild)
	}
	if err := a.Verify(); err != nil {
		return nil, fmt.Errorf("%s: %w: the file changed after the build; %s", where, err, rebuild)
	}
	if err := a.checkSources(dir); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return &a, nil
}

// nameRE is what an implementation's name may be: the sidecar's impl becomes --impl
// NAME, is printed in tables and names files, so one from a hand-edited sidecar is held
// to it as kernels build --name is.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// ValidName says whether name may name a user's implementation (kernels build --name,
// a sidecar's impl): lower-case letters, digits and dashes, not starting with a dash,
// at most 64 characters.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// entryRE is a C identifier, what a cubin's entry point is.
var entryRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`)

// checkSense refuses a sidecar's names and numbers that no build writes: a name that
// is not one (a path, a comma, a terminal escape) or a warp count no GPU runs.
func (a *Artifact) checkSense() error {
	switch {
	case !nameRE.MatchString(a.Impl):
		return fmt.Errorf("impl %s is not a name: want lower-case letters, digits and dashes, as kernels build --name takes", input.Quote(a.Impl))
	case !entryRE.MatchString(a.Entry):
		return fmt.Errorf("entry %s is not a function name", input.Quote(a.Entry))
	case !entryRE.MatchString(a.Kernel):
		return fmt.Errorf("kernel %s is not a function name", input.Quote(a.Kernel))
	case !targetRE.MatchString(a.Target):
		return fmt.Errorf("target %s: want sm_NN, sm_NNa or compute_NN", input.Quote(a.Target))
	case a.NumWarps < 0 || a.NumWarps > 32 || a.NumWarps&(a.NumWarps-1) != 0:
		return fmt.Errorf("num_warps %d: want a power of two from 1 to 32", a.NumWarps)
	case a.BlockThreads < 0 || a.BlockThreads > 1024 || a.Shared < 0 || a.GlobalScratchSize < 0 || a.ProfileScratchSize < 0:
		return fmt.Errorf("block_threads %d, shared %d, scratch %d/%d: want 0 to 1024 threads and no negative size",
			a.BlockThreads, a.Shared, a.GlobalScratchSize, a.ProfileScratchSize)
	}
	return nil
}

var targetRE = regexp.MustCompile(`^(sm_[0-9]{2,3}[a-z]?|compute_[0-9]{2,3}[a-z]?)$`)

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
	if got := SourcesHash(files); got != a.SourceSHA256 {
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

// Impls lists the implementations the catalogue holds, sorted.
func (c *Catalog) Impls() []string {
	var out []string
	for _, a := range c.Artifacts {
		if !slices.Contains(out, a.Impl) {
			out = append(out, a.Impl)
		}
	}
	sort.Strings(out)
	return out
}

// Kernels lists the kernels the catalogue holds for impl, sorted.
func (c *Catalog) Kernels(impl string) []string {
	var out []string
	for _, a := range c.Artifacts {
		if a.Impl == impl && !slices.Contains(out, a.Kernel) {
			out = append(out, a.Kernel)
		}
	}
	sort.Strings(out)
	return out
}

// Host is what decides whether an artifact can be loaded on this machine.
type Host struct {
	// CCs are the compute capabilities (major*10+minor) of the GPUs here, by ordinal;
	// none with NoGPU saying why.
	CCs   []int
	NoGPU string
	// Lib is the NVSHMEM host library's version; zero when it was not found (NoLib
	// says why).
	Lib   [3]int
	NoLib string
}

// LoadsOn says whether the artifact can be loaded on a GPU of h and served by its
// NVSHMEM host library, and if not, why.
func (a *Artifact) LoadsOn(h Host) (bool, string) {
	if len(h.CCs) == 0 {
		why := h.NoGPU
		if why == "" {
			why = "the NVIDIA driver sees no GPU"
		}
		return false, "no GPU here (" + why + ")"
	}
	var fits []string
	for i, cc := range h.CCs {
		if a.Format == "cubin" && runsOn(a, cc) || a.Format == "ptx" && a.Arch <= cc {
			fits = append(fits, fmt.Sprintf("GPU %d", i))
		}
	}
	if len(fits) == 0 {
		return false, fmt.Sprintf("built for %s, the GPUs here are %s: rebuild with --arch %d", a.Target, ccList(h.CCs), h.CCs[0])
	}
	if a.UsesNVSHMEM {
		if h.Lib == ([3]int{}) {
			return false, "NVSHMEM host library not found (" + h.NoLib + ")"
		}
		if err := a.CheckHost(h.Lib); err != nil {
			d := a.DeviceVersion
			return false, fmt.Sprintf("device library %d.%d.%d is newer than host library %d.%d.%d: install NVSHMEM >= %d.%d or rebuild against %d.%d",
				d[0], d[1], d[2], h.Lib[0], h.Lib[1], h.Lib[2], d[0], d[1], h.Lib[0], h.Lib[1])
		}
	}
	how := "cubin"
	if a.Format == "ptx" {
		how = "PTX, compiled by the driver at load"
	}
	return true, fmt.Sprintf("yes: %s (%s)", strings.Join(fits, ", "), how)
}

func ccList(ccs []int) string {
	var s []string
	for _, cc := range ccs {
		s = append(s, fmt.Sprintf("sm_%d", cc))
	}
	slices.Sort(s)
	return strings.Join(slices.Compact(s), ", ")
}

// CheckLoad is the check made before a launch: every kernel of impl named in kernels
// has an artifact for each of the first nproc GPUs of h, which h's host library can
// serve. The error says what to do.
func (c *Catalog) CheckLoad(impl string, kernels []string, h Host, nproc int) error {
	ccs := h.CCs
	if nproc < len(ccs) {
		ccs = ccs[:nproc]
	}
	for _, k := range kernels {
		if !slices.Contains(c.Kernels(impl), k) {
			continue // served by symmem's own kernel (wait_signal), or not asked for
		}
		for _, cc := range ccs {
			a, err := c.Select(impl, k, 0, cc)
			if err != nil {
				return fmt.Errorf("%s in %s: %w", impl, c.Dir, err)
			}
			if err := a.CheckHost(h.Lib); err != nil && h.Lib != ([3]int{}) {
				return fmt.Errorf("%s in %s: %w", impl, c.Dir, err)
			}
		}
	}
	return nil
}

// CheckSizes says whether impl's kernels among kernels serve a message of each of
// sizes bytes: a kernel whose size is a tl.constexpr was built for some sizes only
// (Artifact.Sizes), and any other size would move nothing. The error names the sizes
// it was built for and how to build the others.
func (c *Catalog) CheckSizes(impl string, kernels []string, sizes []int64) error {
	for _, a := range c.Artifacts {
		if a.Impl != impl || len(a.Sizes) == 0 || !slices.Contains(kernels, a.Kernel) {
			continue
		}
		var missing []string
		for _, n := range sizes {
			if !slices.Contains(a.Sizes, n) && !slices.Contains(missing, strconv.FormatInt(n, 10)) {
				missing = append(missing, strconv.FormatInt(n, 10))
			}
		}
		if len(missing) > 0 {
			built := make([]string, len(a.Sizes))
			for i, n := range a.Sizes {
				built[i] = strconv.FormatInt(n, 10)
			}
			return fmt.Errorf("%s's %s takes its size as a tl.constexpr and was built for %s bytes only, not %s: rebuild with symmem kernels build FILE.py --sizes %s (%s)",
				impl, a.Kernel, strings.Join(built, ","), strings.Join(missing, ","), strings.Join(append(built, missing...), ","), a.Wraps)
		}
	}
	return nil
}

// The user catalogues this process launches from, by implementation: run and bench
// register them (on the launcher and on every rank) before they look an
// implementation up.
var (
	userMu  sync.Mutex
	userCat = map[string]*Catalog{}
)

// Use makes c the catalogue of each implementation it holds.
func Use(c *Catalog) {
	userMu.Lock()
	defer userMu.Unlock()
	for _, impl := range c.Impls() {
		userCat[impl] = c
	}
}

// For is the catalogue impl's kernels come from: a user's, registered with Use, or
// the embedded one.
func For(impl string) (*Catalog, bool) {
	userMu.Lock()
	defer userMu.Unlock()
	if c, ok := userCat[impl]; ok {
		return c, true
	}
	return Default(), false
}
