package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/input"
	"github.com/symmem/symmem/internal/kernelbuild"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/kernels"
)

// NewCmdKernels builds `symmem kernels`: list the kernels symmem can launch, and build
// a user's Triton file into kernels that run and bench take with --kernels DIR.
func NewCmdKernels(streams IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kernels",
		Short: "List the kernels symmem can launch, or build your own Triton kernels for it",
		Long: `kernels list shows the kernels embedded in symmem and, given a directory, your own
(built with kernels build), with their target, warps, Triton and NVSHMEM device-library
versions and whether this machine can load each.

kernels example lists (or prints) example files to start your own from.

kernels build compiles the kernels of your own Triton file ahead of time with the NVSHMEM
device library, exactly as symmem's own are built; run and bench then take them with
--kernels DIR --impl NAME (docs/kernels.md has the signatures a kernel must follow).`,
		Example: `  symmem kernels list
  symmem kernels example strided_put > mine.py
  symmem kernels build --check mine.py
  symmem kernels build examples/strided_put.py --arch 90 --out mykernels
  symmem kernels list mykernels
  symmem bench --kernels mykernels --impl strided-put,triton,copy-engine --op put`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(NewCmdKernelsList(streams, nil), NewCmdKernelsBuild(streams, nil), NewCmdKernelsExample(streams), NewCmdKernelsPack(streams))
	return cmd
}

// KernelsListOptions are `symmem kernels list`'s settings.
type KernelsListOptions struct {
	Dir        string
	JSON       bool
	NVSHMEMLib string
	// Impls, Ops and Arch keep the artifacts of these implementations, operations and
	// target (sm_90, 90, sm_90a: compute capability 9.0); empty keeps all.
	Impls, Ops []string
	Arch       string
	// All lists every artifact; without it the table has a row per implementation and
	// target (the JSON always has every artifact).
	All bool
	// Host reads this machine's GPUs and NVSHMEM library (tests replace it).
	Host func(lib string) kernels.Host
}

// NewCmdKernelsList builds `symmem kernels list [DIR]`.
func NewCmdKernelsList(streams IO, runF func(*KernelsListOptions) error) *cobra.Command {
	opts := &KernelsListOptions{Host: streams.host}
	cmd := &cobra.Command{
		Use:   "list [DIR]",
		Short: "List the embedded kernels and those in DIR, and whether this machine can load each",
		Example: `  symmem kernels list
  symmem kernels list mykernels --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usage("kernels list takes one directory at most, got %q: symmem kernels list [DIR]", strings.Join(args, " "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Dir = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return runKernelsList(opts, streams)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.JSON, "json", false, "print the list as JSON (every artifact)")
	f.BoolVar(&opts.All, "all", false, "a row per artifact (kernel and warps), not per implementation and target")
	f.StringVar(&opts.NVSHMEMLib, "nvshmem-lib", "", "path to libnvshmem_host.so.3 (or SYMMEM_NVSHMEM_LIB; default: search)")
	f.StringSliceVar(&opts.Impls, "impl", nil, "only these implementations (triton, cuda, ...)")
	f.StringSliceVar(&opts.Ops, "op", nil, "only the kernels of these operations (put, all-reduce, ...)")
	f.StringVar(&opts.Arch, "arch", "", "only the kernels for this GPU architecture: 90, sm_90 or sm_90a (compute capability 9.0)")
	return cmd
}

// keep says whether e passes --impl, --op and --arch (arch: the compute capability's
// digits, "" for any).
func (o *KernelsListOptions) keep(e KernelEntry, arch string) bool {
	if len(o.Impls) > 0 && !slices.Contains(o.Impls, e.Impl) {
		return false
	}
	if len(o.Ops) > 0 && !slices.ContainsFunc(strings.Split(e.Op, ","), func(op string) bool { return slices.Contains(o.Ops, op) }) {
		return false
	}
	return arch == "" || strings.TrimRight(strings.TrimPrefix(strings.TrimPrefix(e.Target, "sm_"), "compute_"), "a") == arch
}

// archDigits reads --arch (90, sm_90, sm_90a, compute_90) as the capability's digits.
func archDigits(arch string) (string, error) {
	d := strings.TrimRight(strings.TrimPrefix(strings.TrimPrefix(arch, "sm_"), "compute_"), "a")
	if _, err := strconv.Atoi(d); arch != "" && (err != nil || len(d) < 2) {
		return "", usage("%s %q: give a compute capability such as 90, sm_90 or sm_100a", setting.Arch, arch)
	}
	return d, nil
}

// KernelEntry is one artifact of `kernels list`.
type KernelEntry struct {
	Source         string   `json:"source"` // "embedded" or the user's directory
	Impl           string   `json:"impl"`
	Kernel         string   `json:"kernel"`
	Op             string   `json:"op"`
	Signature      []string `json:"signature"` // visible parameters, name:type
	Target         string   `json:"target"`
	Warps          int      `json:"warps"`
	Format         string   `json:"format"`
	Triton         string   `json:"triton_version"`
	NVSHMEM        string   `json:"nvshmem_device_version"`
	File           string   `json:"file"`
	Loadable       bool     `json:"loadable"`
	LoadableWhy    string   `json:"loadable_detail"`
	SourceSHA256   string   `json:"source_sha256,omitempty"`
	ArtifactSHA256 string   `json:"sha256"`
}

// KernelList is what `kernels list --json` prints.
type KernelList struct {
	GPUs       []int         `json:"gpus"` // compute capability of each GPU here
	NoGPU      string        `json:"no_gpu,omitempty"`
	NVSHMEMLib string        `json:"nvshmem_host_version,omitempty"`
	NoLib      string        `json:"no_nvshmem,omitempty"`
	Kernels    []KernelEntry `json:"kernels"`
}

func runKernelsList(opts *KernelsListOptions, streams IO) error {
	cats, reg := []*kernels.Catalog{kernels.Default()}, streams.registry()
	if opts.Dir != "" {
		c, err := kernels.LoadDir(opts.Dir)
		if err != nil {
			return symmem.WithExitCode(symmem.ExitUsage, err)
		}
		cats = append(cats, c)
	}
	h := opts.Host(opts.NVSHMEMLib)
	list := KernelList{GPUs: h.CCs, NoGPU: h.NoGPU, NoLib: h.NoLib}
	if list.GPUs == nil {
		list.GPUs = []int{}
	}
	if h.Lib != ([3]int{}) {
		list.NVSHMEMLib = fmt.Sprintf("%d.%d.%d", h.Lib[0], h.Lib[1], h.Lib[2])
	}
	arch, err := archDigits(opts.Arch)
	if err != nil {
		return err
	}
	for _, c := range cats {
		for _, a := range c.Artifacts {
			if e := entryOf(reg, c, a, h); opts.keep(e, arch) {
				list.Kernels = append(list.Kernels, e)
			}
		}
	}
	if len(list.Kernels) == 0 && (len(opts.Impls) > 0 || len(opts.Ops) > 0 || arch != "") {
		return usage("no kernel matches --impl %s --op %s --arch %s: symmem kernels list without them lists all", strings.Join(opts.Impls, ","), strings.Join(opts.Ops, ","), opts.Arch)
	}
	if opts.JSON {
		return report.JSON(streams.Out, list)
	}
	// A user's sidecar is a file anyone may have written: what it says is printed, not
	// obeyed by the terminal.
	printKernelList(input.Terminal(streams.Out), list, opts.All)
	return nil
}

func entryOf(reg registry, c *kernels.Catalog, a *kernels.Artifact, h kernels.Host) KernelEntry {
	e := KernelEntry{Source: "embedded", Impl: a.Impl, Kernel: a.Kernel, Target: a.Target, Warps: a.NumWarps, Format: a.Format,
		Triton: a.TritonVersion, NVSHMEM: "-", File: a.Path(), SourceSHA256: a.SourceSHA256, ArtifactSHA256: a.SHA256, Signature: []string{}}
	if c.Dir != "" {
		e.Source = c.Dir
	}
	for _, k := range kernels.UserKernels() {
		if k.Kernel == a.Kernel {
			// A user's: the key it was declared under; symmem's own: the op it serves.
			e.Op = k.Key
			if c.Dir == "" && k.Op != "" {
				e.Op = k.Op
			}
		}
	}
	if im, ok := reg.byName(a.Impl); e.Op == "" && ok {
		// symmem's own kernels beyond the user's signatures: the collectives.
		var serves []string
		for _, op := range im.Ops {
			if slices.Contains(im.Kernels[op], a.Kernel) {
				serves = append(serves, op)
			}
		}
		e.Op = strings.Join(serves, ",")
	}
	if e.Op == "" {
		e.Op = "-" // sm_store: the plain-store put and get
	}
	for _, p := range a.Params {
		if !p.Hidden {
			e.Signature = append(e.Signature, p.Name+":"+p.Type)
		}
	}
	if d := a.DeviceVersion; a.UsesNVSHMEM && len(d) == 3 {
		e.NVSHMEM = fmt.Sprintf("%d.%d.%d", d[0], d[1], d[2])
	}
	e.Loadable, e.LoadableWhy = a.LoadsOn(h)
	return e
}

func printKernelList(w io.Writer, l KernelList, all bool) {
	switch {
	case len(l.GPUs) == 0:
		report.Note(w, fmt.Sprintf("this machine: no GPU here (%s)", l.NoGPU))
	default:
		var ccs []string
		for i, cc := range l.GPUs {
			ccs = append(ccs, fmt.Sprintf("GPU %d sm_%d", i, cc))
		}
		lib := "NVSHMEM host library " + l.NVSHMEMLib
		if l.NVSHMEMLib == "" {
			lib = "no NVSHMEM host library (" + l.NoLib + ")"
		}
		report.Note(w, fmt.Sprintf("this machine: %s; %s", strings.Join(ccs, ", "), lib))
	}
	if !all {
		printKernelSummary(w, l)
		return
	}
	t := report.Table{Header: []string{"source", "impl", "kernel", "op", "target", "warps", "format", "triton", "nvshmem", "loads here"}, Left: true,
		Optional: []string{"source", "format", "triton", "nvshmem", "op"}}
	for _, e := range l.Kernels {
		warps := "-"
		if e.Warps > 0 {
			warps = strconv.Itoa(e.Warps)
		}
		triton := e.Triton
		if triton == "" {
			triton = "-"
		}
		loads := e.LoadableWhy
		if !e.Loadable && len(l.GPUs) == 0 {
			loads = "no GPU here"
		}
		t.Rows = append(t.Rows, []string{e.Source, e.Impl, e.Kernel, e.Op, e.Target, warps, e.Format, triton, e.NVSHMEM, loads})
	}
	t.Print(w)
}

// printKernelSummary prints a row per source, implementation and target: how many
// kernels and artifacts, their warps, and whether they load here.
func printKernelSummary(w io.Writer, l KernelList) {
	type key struct{ source, impl, target string }
	type group struct {
		kernels, warps, formats, triton, nvshmem, loads []string
		artifacts                                       int
	}
	var order []key
	groups := map[key]*group{}
	add := func(list *[]string, v string) {
		if v != "" && v != "-" && !slices.Contains(*list, v) {
			*list = append(*list, v)
		}
	}
	for _, e := range l.Kernels {
		k := key{e.Source, e.Impl, e.Target}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		g.artifacts++
		add(&g.kernels, e.Kernel)
		if e.Warps > 0 {
			add(&g.warps, strconv.Itoa(e.Warps))
		}
		add(&g.formats, e.Format)
		add(&g.triton, e.Triton)
		add(&g.nvshmem, e.NVSHMEM)
		loads := e.LoadableWhy
		if !e.Loadable && len(l.GPUs) == 0 {
			loads = "no GPU here"
		}
		add(&g.loads, loads)
	}
	dash := func(v []string) string {
		if len(v) == 0 {
			return "-"
		}
		return strings.Join(v, ",")
	}
	t := report.Table{Header: []string{"source", "impl", "target", "kernels", "artifacts", "warps", "format", "triton", "nvshmem", "loads here"}, Left: true,
		Optional: []string{"source", "format", "triton", "nvshmem", "artifacts"}}
	for _, k := range order {
		g := groups[k]
		slices.SortFunc(g.warps, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
		t.Rows = append(t.Rows, []string{k.source, k.impl, k.target, strconv.Itoa(len(g.kernels)), strconv.Itoa(g.artifacts), dash(g.warps),
			dash(g.formats), dash(g.triton), dash(g.nvshmem), strings.Join(g.loads, "; ")})
	}
	t.Print(w)
	report.Note(w, fmt.Sprintf("(%d artifacts in %d rows: --all lists each, --json all of them with their files)", len(l.Kernels), len(t.Rows)))
}

// KernelsBuildOptions are `symmem kernels build`'s settings.
type KernelsBuildOptions struct {
	File    string
	Arch    []int
	Warps   []int
	Out     string
	Name    string
	Kernels []string // OP=FUNCTION
	Check   bool     // --check: the file's declarations and signatures only, nothing compiled
	Sizes   []string // --sizes: the message sizes a kernel's tl.constexpr size is built for
	// Consts are --const NAME=V[,V...]: the values a tl.constexpr that means nothing to
	// symmem is built for, each a variant (implementation NAME[CONST=V]).
	Consts []string
	// Script is a build script to run; "" runs the one this binary embeds (tests set a
	// checkout's).
	Script string
}

// DefaultBuildWarps are the warp counts kernels build compiles data kernels for: the
// project's own, so that run and bench's automatic shapes (4 warps up to 64K, 32 past
// it) find a kernel.
var DefaultBuildWarps = []int{4, 8, 16, 32}

// NewCmdKernelsBuild builds `symmem kernels build FILE.py`.
func NewCmdKernelsBuild(streams IO, runF func(*KernelsBuildOptions) error) *cobra.Command {
	opts := &KernelsBuildOptions{}
	cmd := &cobra.Command{
		Use:   "build FILE.py",
		Short: "Compile the kernels of your Triton file ahead of time, as symmem's own are built",
		Long: `build runs symmem's own kernel build (kernels/build-kernels.py) on your Triton file: each
kernel is compiled ahead of time with the NVSHMEM device library for every --arch and
--warps, and written to --out with the same JSON sidecar symmem's kernels have (entry,
parameters, warps, target, Triton and NVSHMEM versions, source hash), beside a copy of
the file. It needs Python 3 with Triton and the NVSHMEM wheel (nvidia-nvshmem-cu13); the
script and the NVSHMEM bindings your kernels import (nvshmem_device) come with symmem.

Which function serves which operation is declared in the file,

  SYMMEM_KERNELS = {"put": "my_put", "get": "my_get"}

or with --kernel put=my_put. A kernel must take the parameters symmem passes, by name
and in order (put and get: dst, src, nbytes, chunk, peer; all-reduce: send, recv,
scratch, nelem, sig, seq, me, n; docs/kernels.md has them all); one that does not is
refused, naming the parameter, before anything is compiled.

A file written for PyTorch's SHMEM modules (torch.distributed._symmetric_memory.
_nvshmem_triton: torch 2.8's putmem_block, getmem_block, putmem_signal_block or torch
2.11's @requires_nvshmem, put, get, get_nbi, alltoall, broadcast, reduce; or the generic
_shmem_triton's get_shmem_backend_module() and @requires_shmem, under any alias) is built
unchanged, whole (its torch imports, gates and tests are not run): a kernel's operation is what it calls
(put, get, put-signal, wait-signal; signal_op the signal op; puts ordered by a fence or
a quiet before a flag put-flag, wait_until its receiver; barrier_all barrier; alltoall,
broadcast and reduce as all-to-all, broadcast and all-reduce on team world, a reduce
kernel per operator), a parameter means what the kernel passes it as
(else what its name says: dst/dest, src/source, nbytes/size_bytes, numel/nelems,
peer/pe, ...; else FILE.symmem.json beside it), a tl.constexpr size is built for --sizes
(8 bytes by default) and a tl.constexpr peer for ranks 0 to 7. A parameter the body never
reads is given any value (the build says so); a tl.constexpr it reads that means nothing
to symmem (my_get_kernel's nbi) is set with --const NAME=V[,V...]: the kernel is built
once per value, each a variant named NAME[nbi=1] in --impl, tables and JSON. It builds
against torch's module where torch has every name the file uses, else against symmem's
copy of that API, so Triton alone suffices. A second function for one operation is a
variant, NAME[fn=FUNCTION]; a put in place (put(p + start, p + start, count, peer), a
program id times a tl.constexpr chunk) is a put, its chunk 128 KiB unless --const says,
with one sender (--pattern pair); one whose puts reach every other rank (a loop over a
world_size that skips its rank, or peers striped by program id) serves --pattern
one-to-all. A matmul (tl.dot) that puts its output rows as it goes, with
all-gather-matmul's parameters, is all-gather-matmul.
A get whose result is added to an operand of the kernel's own and stored (PyTorch's
fused get-add) is get-add, a kernel per element type, its block (the tl.constexpr its
tl.arange spans) 1024 elements unless --const says; run refuses a larger --count.
Kernels symmem does not serve (a fence alone, a test's own logic, a package not
installed) are listed with the reason.

A build the --out directory already holds (the same file, options, symmem and
toolchain) is not done again, and says so; every build ends with where its time went.

Exit status 2 when the file is refused or this machine cannot build (no Python, Triton
or NVSHMEM wheel): the message says what is missing.`,
		Example: `  symmem kernels build examples/strided_put.py --arch 90 --out mykernels
  symmem kernels build examples/seed_put.py --sizes 8,1M,256M --out mykernels
  symmem kernels build my_get.py --const nbi=0,1 --out mykernels   # variants my-get[nbi=0], my-get[nbi=1]
  symmem kernels build my.py --kernel put=my_put --name mine --warps 8,32
  symmem kernels build examples/one_shot_all_reduce.py --out mykernels`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usage("kernels build takes one Triton file, got %d arguments (see 'symmem kernels build --help')", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runKernelsBuild(cmd.Context(), opts, streams)
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&opts.Arch, "arch", []int{90}, "GPU architectures to compile for (80, 90, 100; 90 = H100/H200)")
	f.IntSliceVar(&opts.Warps, "warps", DefaultBuildWarps, "warp counts to compile the data kernels for (0 = the default list)")
	f.StringVar(&opts.Out, "out", "user-kernels", "directory to write the kernels to (give it to run and bench as --kernels)")
	f.StringVar(&opts.Name, "name", "", "implementation name for --impl (default: the file's name)")
	f.BoolVar(&opts.Check, "check", false, "check the file's declarations and signatures against what symmem passes, and compile nothing (needs Python 3.9 or later only: a machine without a GPU, a CI job)")
	f.StringSliceVar(&opts.Sizes, "sizes", nil, "message sizes (accepts K, M, G) a kernel whose size is a tl.constexpr is built for (PyTorch-style files; default 8): run and bench serve only these")
	f.StringArrayVar(&opts.Consts, "const", nil, "NAME=V[,V...]: the values a kernel's tl.constexpr NAME (one symmem gives no meaning) is built for, a variant each, named IMPL[NAME=V] (PyTorch-style files; repeatable)")
	f.StringSliceVar(&opts.Kernels, "kernel", nil, "OP=FUNCTION: the function serving an operation (put, get, put-signal, latency, wait-signal, signal, put-flag, put-flag:quiet, wait-flag, barrier, all-reduce, reduce-scatter, all-gather, all-to-all, broadcast, dispatch, combine; all-reduce:float32, reduce-scatter:float32 and combine:float32 for float32, all-reduce:max (:prod, :min, :avg) for an operator other than sum); beats SYMMEM_KERNELS in the file")
	return cmd
}

// buildArgs checks the options and turns them into the script's arguments.
func buildArgs(o *KernelsBuildOptions, reg registry) ([]string, error) {
	if !strings.HasSuffix(o.File, ".py") {
		return nil, usage("kernels build %s: give a Triton file (FILE.py)", o.File)
	}
	// The script reads the file whole: a named pipe, a device or /dev/zero behind the
	// name would hang it or fill its memory.
	if err := input.Check(o.File, maxBuildSource); errors.As(err, new(*fs.PathError)) {
		return nil, usage("kernels build %s: %v", o.File, errors.Unwrap(err))
	} else if err != nil {
		return nil, usage("kernels build: %v; give a Triton source file", err)
	}
	name := o.Name
	if name == "" {
		name = strings.ReplaceAll(strings.TrimSuffix(filepath.Base(o.File), ".py"), "_", "-")
	}
	if !kernels.ValidName(name) {
		return nil, usage("%s %s: use lower-case letters, digits and dashes, 64 at most, not starting with a dash (it becomes --impl NAME)", setting.ImplName, input.Quote(name))
	}
	if _, ok := reg.byName(name); ok {
		return nil, usage("%s %s is symmem's own implementation; give your kernels another name (it becomes --impl NAME)", setting.ImplName, name)
	}
	warps := o.Warps
	if len(warps) == 0 || len(warps) == 1 && warps[0] == 0 {
		warps = DefaultBuildWarps
	}
	for _, w := range warps {
		if w < 1 || w > 32 || w&(w-1) != 0 {
			return nil, usage("%s %d: give powers of two from 1 to 32", setting.Warps, w)
		}
	}
	for _, a := range o.Arch {
		if a < 70 || a > 200 {
			return nil, usage("%s %d: give a compute capability such as 80, 90 or 100", setting.Arch, a)
		}
	}
	args := []string{"--user", o.File, "--name", name, "--out", o.Out, "--arch", joinInts(o.Arch), "--warps", joinInts(warps)}
	if o.Check {
		args = append(args, "--check")
	}
	if len(o.Sizes) > 0 {
		var sizes []string
		for _, v := range o.Sizes {
			var n symmem.Size
			if err := n.Set(v); err != nil || n == 0 {
				return nil, usage("%s %s: give message sizes in bytes (8, 1M, 256M)", setting.Sizes, v)
			}
			sizes = append(sizes, strconv.FormatInt(int64(n), 10))
		}
		args = append(args, "--sizes", strings.Join(sizes, ","))
	}
	for _, c := range o.Consts {
		name, values, ok := strings.Cut(c, "=")
		if !ok || name == "" || values == "" {
			return nil, usage("%s %s: want NAME=VALUE[,VALUE...], as --const nbi=0,1", setting.Const, input.Quote(c))
		}
		args = append(args, "--const", c)
	}
	for _, k := range o.Kernels {
		op, fn, ok := strings.Cut(k, "=")
		if _, known := kernels.OpKernels()[op]; !ok || !known || fn == "" {
			return nil, usage("%s %q: want OP=FUNCTION with OP one of %s (%s)", setting.Kernel, k, strings.Join(kernels.UserOps(), ", "), kernels.RedOpKeys)
		}
		args = append(args, "--op", k)
	}
	return args, nil
}

// maxBuildSource bounds a Triton file kernels build takes: sources are kilobytes.
const maxBuildSource = 16 << 20

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func runKernelsBuild(ctx context.Context, o *KernelsBuildOptions, streams IO) error {
	args, err := buildArgs(o, streams.registry())
	if err != nil {
		return err
	}
	script, dir := o.Script, ""
	if script == "" {
		var cleanup func()
		if script, cleanup, err = kernelbuild.WriteScript(); err != nil {
			return usage("%v", err)
		}
		defer cleanup()
		// What the script writes for itself (a PyTorch-style file's entries) goes in
		// the script's directory, which goes with it even when the script is killed.
		dir = filepath.Dir(filepath.Dir(script))
		args = append(args, "--tmp", dir)
	} else {
		if dir, err = os.MkdirTemp("", "symmem-build-"); err != nil {
			return usage("kernels build: a directory for the table of signatures: %v: set TMPDIR to a directory you can write", err)
		}
		defer os.RemoveAll(dir)
	}
	// The script reads the kernels' signatures from this binary's table.
	sigs, err := kernelbuild.WriteSignatures(dir)
	if err != nil {
		return usage("%v", err)
	}
	args = append(args, "--signatures", sigs)
	py, err := exec.LookPath("python3")
	if err != nil {
		return usage("kernels build needs Python 3 with Triton and the NVSHMEM wheel (pip install triton nvidia-nvshmem-cu13), and python3 is not on the PATH: run it on the GPU machine")
	}
	cmd := kernelbuild.PythonCommand(ctx, py, append([]string{script}, args...)...)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = streams.Out, &errb
	cmd.Env = append(os.Environ(), "NVSHMEM_DISABLE_NVLS=1", "NCCL_NVLS_ENABLE=0", "TORCH_SYMM_MEM_DISABLE_MULTICAST=1")
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		// The script refused the file or cannot build here; its last line says why.
		return usage("%s", kernelbuild.LastLine(errb.String()))
	}
	streams.Err.Write(errb.Bytes())
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		// Stopped (Ctrl-C, SIGTERM): the script and its compilers were killed with it.
		return fmt.Errorf("kernels build: stopped; %s may hold part of the build: build again: %w", o.Out, ctx.Err())
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			// Not symmem's doing (that is the case above): the OOM killer, say.
			return fmt.Errorf("kernels build: %s was killed by %v; its last words: %s", filepath.Base(script), ws.Signal(), kernelbuild.LastLine(errb.String()))
		}
		return fmt.Errorf("kernels build: %s failed (exit %d): %s", filepath.Base(script), ee.ExitCode(), kernelbuild.LastLine(errb.String()))
	}
	return fmt.Errorf("kernels build: %w", err)
}
