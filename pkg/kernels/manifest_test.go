package kernels

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/ops"
	embedded "github.com/symmem/symmem/kernels"
)

// kernelsDir is the checkout's kernels/: the sources and their manifests.
var kernelsDir = filepath.Join("..", "..", "kernels")

// manifestFile is a SOURCE.manifest.json as kernels/manifest.py reads it.
type manifestFile struct {
	Impl    string                   `json:"impl"`
	Sources []string                 `json:"sources"`
	Launch  map[string]any           `json:"launch"`
	Kernels map[string]manifestEntry `json:"kernels"`
}

type manifestEntry struct {
	Entry    string   `json:"entry"`
	Params   []string `json:"params"`
	Ops      []string `json:"ops"`
	Receives []string `json:"receives"`
	DType    string   `json:"dtype"`
	RedOps   []string `json:"redops"`
	Warps    []int    `json:"warps"`
	From     string   `json:"from"`
}

// readManifests reads every manifest under dir's triton/ and cuda/ by its path under
// dir, each kernel's "from" resolved to the source's manifest it names.
func readManifests(t *testing.T, dir string) map[string]manifestFile {
	t.Helper()
	out := map[string]manifestFile{}
	for _, sub := range []string{"triton", "cuda"} {
		names, _ := filepath.Glob(filepath.Join(dir, sub, "*.manifest.json"))
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			var m manifestFile
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			out[sub+"/"+filepath.Base(n)] = m
		}
	}
	if len(out) == 0 {
		t.Fatalf("no manifests in %s", dir)
	}
	for path, m := range out {
		for k, e := range m.Kernels {
			if e.From == "" {
				continue
			}
			src := out[filepath.Dir(path)+"/"+strings.TrimSuffix(strings.TrimSuffix(e.From, ".cu"), ".py")+".manifest.json"]
			from, ok := src.Kernels[k]
			if !ok {
				t.Fatalf("%s: %s comes from %s, which does not declare it", path, k, e.From)
			}
			m.Kernels[k] = from
		}
	}
	return out
}

// Every sidecar of symmem's own kernels carries its manifest's facts, as the manifest
// says them now: a fact missing from a sidecar, or one that contradicts it, fails here
// (kernels/manifest.py sidecars writes them; a contradicted entry point, parameter or
// source needs a rebuild). Each manifest names only operations, operators and element
// types symmem has.
func TestManifestsMatchTheSidecars(t *testing.T) {
	ms := readManifests(t, kernelsDir)
	impls := map[string]bool{}
	for path, m := range ms {
		impls[m.Impl] = true
		for k, e := range m.Kernels {
			for _, o := range append(slices.Clone(e.Ops), e.Receives...) {
				if !ops.Op(o).Known() {
					t.Errorf("%s: %s serves %q, no operation of symmem's", path, k, o)
				}
			}
			for _, r := range e.RedOps {
				if _, err := ops.LookupRedOp(r); err != nil && r != ops.First.Name {
					t.Errorf("%s: %s combines with %q: %v", path, k, r, err)
				}
			}
			if e.DType != "" && ops.ElemSize(e.DType) == 0 || e.DType != ops.Canonical(e.DType) {
				t.Errorf("%s: %s: dtype %q is no canonical element type of symmem's", path, k, e.DType)
			}
		}
	}
	checked := 0
	for _, a := range Default().Artifacts {
		if !impls[a.Impl] {
			continue
		}
		m, ok := ms[a.From]
		e, declared := m.Kernels[a.Kernel]
		if !ok || !declared || m.Impl != a.Impl {
			t.Errorf("%s carries no manifest that declares it (manifest %q): declare it beside its source and run kernels/manifest.py sidecars", a.Name(), a.From)
			continue
		}
		checked++
		want := Manifest{Ops: e.Ops, Receives: e.Receives, DType: e.DType, RedOps: e.RedOps, Warps: e.Warps, From: a.From}
		if got := a.Manifest; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s carries %+v, and %s says %+v: run kernels/manifest.py sidecars", a.Name(), got, a.From, want)
		}
		if a.NumWarps > 0 && !slices.Contains(e.Warps, a.NumWarps) {
			t.Errorf("%s is built for %d warps, which %s does not list (%v)", a.Name(), a.NumWarps, a.From, e.Warps)
		}
		if !slices.Equal(slices.Sorted(slices.Values(m.Sources)), a.Sources) {
			t.Errorf("%s was built from %v, and %s says %v", a.Name(), a.Sources, a.From, m.Sources)
		}
		if e.Entry != "" {
			var params []string
			for _, p := range a.Params {
				params = append(params, p.Name+":"+p.Type)
			}
			if a.Entry != e.Entry || !slices.Equal(params, e.Params) {
				t.Errorf("%s is %s(%s), and %s says %s(%s)", a.Name(), a.Entry, strings.Join(params, ", "), a.From, e.Entry, strings.Join(e.Params, ", "))
			}
		}
		if grid, coop := m.Launch["grid"], m.Launch["cooperative"]; grid != nil && float64(a.Grid) != grid || coop != nil && a.Cooperative != coop {
			t.Errorf("%s is launched with grid %d, cooperative %v, and %s says %v", a.Name(), a.Grid, a.Cooperative, a.From, m.Launch)
		}
	}
	if checked == 0 {
		t.Fatal("no sidecar of symmem's own kernels checked")
	}
}

// Every kernel a manifest declares is in kernels/build, for every target and warp count
// its source's other kernels are built for.
func TestManifestKernelsAreBuilt(t *testing.T) {
	type built struct{ target, format string }
	for path, m := range readManifests(t, kernelsDir) {
		have := map[string]map[built][]int{} // by kernel: its targets, each with its warp counts
		all := map[built]bool{}
		for _, a := range Default().Artifacts {
			if a.From != path {
				continue
			}
			if have[a.Kernel] == nil {
				have[a.Kernel] = map[built][]int{}
			}
			b := built{a.Target, a.Format}
			have[a.Kernel][b], all[b] = append(have[a.Kernel][b], a.NumWarps), true
		}
		for k, e := range m.Kernels {
			if len(have[k]) == 0 {
				t.Errorf("%s declares %s/%s, which kernels/build does not have: build it (kernels/build-kernels.py) or take it out", path, m.Impl, k)
				continue
			}
			for b := range all {
				ws := have[k][b]
				slices.Sort(ws)
				if want := e.Warps; len(ws) == 0 || len(want) > 0 && ws[0] != 0 && !slices.Equal(ws, want) {
					t.Errorf("%s/%s has %v warps for %s %s, and %s says %v", m.Impl, k, ws, b.target, b.format, path, want)
				}
			}
		}
	}
}

// DefaultManifests, read from one sidecar a kernel, says what the whole catalogue
// says.
func TestDefaultManifestsAreTheCatalogues(t *testing.T) {
	got, want := DefaultManifests(), Default().Manifests()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DefaultManifests:\n%v\nthe catalogue's:\n%v", got, want)
	}
	if len(got) < 50 {
		t.Errorf("%d kernels", len(got))
	}
}

// The reduction operators' codes the kernels know are internal/ops' (RedOp.Code,
// NCCL's ncclRedOp_t): nvshmem_collectives.cu's enum is the line ops' table makes, and
// symmem_collectives.py's op_identity, op_combine and op_finish (run by python3, as
// plain Python against a stand-in for triton.language) combine every operator its
// kernels' manifest lists as ops' table does. A code a kernel's manifest does not list
// is refused on the host before a launch (internal/backend/gpu: launchWith); the
// kernels as built sum it.
func TestKernelsKnowTheRedOpCodes(t *testing.T) {
	var enum []string
	for _, r := range append(ops.RedOps(), ops.First) {
		enum = append(enum, fmt.Sprintf("OP_%s = %d", strings.ToUpper(r.Name), r.Code))
	}
	line := "enum { " + strings.Join(enum, ", ") + " };"
	cu, err := os.ReadFile(filepath.Join(kernelsDir, "cuda", "nvshmem_collectives.cu"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cu), "\n"+line+"\n") {
		t.Errorf("kernels/cuda/nvshmem_collectives.cu does not declare the codes as internal/ops does:\n%s", line)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 here")
	}
	var codes []int
	for _, r := range append(ops.RedOps(), ops.First) {
		codes = append(codes, r.Code)
	}
	js, _ := json.Marshal(codes)
	out, err := exec.Command("python3", "-c", runCombine, filepath.Join(kernelsDir, "triton", "symmem_collectives.py"), string(js)).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	var got map[string]float64
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("python3 said %s: %v", out, err)
	}
	inputs := []float64{3, -2, 5}
	for _, a := range Default().Artifacts {
		if a.Impl != "triton" || !a.Takes("op") || a.DType == "" {
			continue // signal_op's op is a signal operation
		}
		if len(a.RedOps) == 0 {
			t.Errorf("%s takes an operator, and its manifest lists none", a.Name())
		}
		for _, name := range a.RedOps {
			r, err := ops.LookupRedOp(name)
			if err != nil {
				t.Fatalf("%s: %v", a.Name(), err)
			}
			acc := []float64{inputs[0]}
			for _, x := range inputs[1:] {
				r.FoldF64(acc, []float64{x})
			}
			if r.Mean() {
				acc[0] /= float64(len(inputs))
			}
			if k := got[fmt.Sprint(r.Code)]; k != acc[0] {
				t.Errorf("%s: code %d (%s) of %v gives %g in symmem_collectives.py, %g in internal/ops", a.Name(), r.Code, r.Name, inputs, k, acc[0])
			}
		}
	}
}

// runCombine runs symmem_collectives.py's operator functions (argv[1]) as plain Python
// for each code of argv[2] (JSON) over the inputs 3, -2, 5 of 3 ranks, and prints
// {code: result}.
const runCombine = `
import ast, json, sys
path = sys.argv[1]
tree = ast.parse(open(path).read(), path)
fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("op_identity", "op_combine", "op_finish")]
if len(fns) != 3:
    sys.exit("%s: op_identity, op_combine and op_finish are not all there" % path)
for f in fns:
    f.decorator_list = []
class tl:
    float32 = float
    where = staticmethod(lambda c, a, b: a if c else b)
    maximum = staticmethod(max)
    minimum = staticmethod(min)
class Count(int):
    def to(self, t):
        return t(self)
ns = {"tl": tl}
exec(compile(ast.Module(body=fns, type_ignores=[]), path, "exec"), ns)
out = {}
for code in json.loads(sys.argv[2]):
    acc = ns["op_identity"](code)
    for x in (3.0, -2.0, 5.0):
        acc = ns["op_combine"](acc, x, code)
    out[str(code)] = ns["op_finish"](acc, code, Count(3))
print(json.dumps(out))
`

// The operators the builds of kernels written for PyTorch's module take by name
// (torch_plan.py's REDOPS, nvshmem_torch.py's _REDUCE_OPS: NVSHMEM's that symmem has)
// are symmem's, read by python3's ast.literal_eval.
func TestTorchRedOpsAreSymmems(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 here")
	}
	for file, name := range map[string]string{"torch_plan.py": "REDOPS", "nvshmem_torch.py": "_REDUCE_OPS"} {
		prog := `import ast, json, sys
tree = ast.parse(open(sys.argv[1]).read())
for n in tree.body:
    if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == sys.argv[2] for t in n.targets):
        print(json.dumps(ast.literal_eval(n.value)))
        break
else:
    sys.exit("%s has no %s" % (sys.argv[1], sys.argv[2]))`
		out, err := exec.Command("python3", "-c", prog, filepath.Join(kernelsDir, "triton", file), name).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", file, err, out)
		}
		var names []string
		if err := json.Unmarshal(out, &names); err != nil || len(names) == 0 {
			t.Fatalf("%s's %s: %s %v", file, name, out, err)
		}
		for _, n := range names {
			if _, err := ops.LookupRedOp(n); err != nil {
				t.Errorf("%s's %s has %q: %v", file, name, n, err)
			}
		}
	}
}

// The index of manifests symmem reads when it starts says what the embedded
// sidecars say, kernel by kernel: a rebuild that did not write it again (symmem
// kernels pack kernels/build) fails here.
func TestIndexIsTheSidecars(t *testing.T) {
	sub, err := fs.Sub(embedded.FS, "build")
	if err != nil {
		t.Fatal(err)
	}
	want, err := firstSidecars(sub)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(sub, IndexName)
	if err != nil {
		t.Fatalf("kernels/build has no %s: run symmem kernels pack kernels/build (%v)", IndexName, err)
	}
	var got []Kernel
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	// Compared as JSON: a sidecar's empty list and the index's left-out one are one fact.
	same := func(a, b []Kernel) bool {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		return string(ja) == string(jb)
	}
	if !same(got, want) {
		t.Errorf("kernels/build/%s differs from the sidecars' manifests: run symmem kernels pack kernels/build", IndexName)
	}
	if os.Getenv(DirEnv) == "" && !same(DefaultManifests(), want) {
		t.Error("DefaultManifests is not the sidecars' manifests")
	}
}
