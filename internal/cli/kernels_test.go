package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/kernelbuild"
	"github.com/symmem/symmem/pkg/kernels"
)

const (
	buildScriptPath = "../../kernels/build-kernels.py"
	userKernels     = "../../pkg/kernels/testdata/user"
)

func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 here")
	}
}

func TestKernelsBuildFlags(t *testing.T) {
	var got *KernelsBuildOptions
	cmd := NewCmdKernelsBuild(IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, func(o *KernelsBuildOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"f.py", "--arch", "80,90", "--warps", "8", "--out", "d", "--name", "mine", "--kernel", "put=p", "--kernel", "get=g"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := &KernelsBuildOptions{File: "f.py", Arch: []int{80, 90}, Warps: []int{8}, Out: "d", Name: "mine", Kernels: []string{"put=p", "get=g"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	args, err := buildArgs(got, IO{Backends: binaryBackends}.registry())
	if err == nil || !strings.Contains(err.Error(), "f.py") {
		t.Errorf("a missing file: %v %v", args, err)
	}
	got.File = "../../examples/strided_put.py"
	args, err = buildArgs(got, IO{Backends: binaryBackends}.registry())
	if err != nil || strings.Join(args, " ") != "--user ../../examples/strided_put.py --name mine --out d --arch 80,90 --warps 8 --op put=p --op get=g" {
		t.Errorf("script args %q %v", args, err)
	}
	// A name the loader would refuse in every sidecar is refused before the build.
	for _, bad := range []string{"-mine", strings.Repeat("a", 65), "My-put"} {
		got.Name = bad
		if _, err := buildArgs(got, IO{Backends: binaryBackends}.registry()); symmem.ExitCode(err) != exitcode.Usage || err == nil || !strings.Contains(err.Error(), "--name") {
			t.Errorf("--name %s: %v, want exit 2 naming --name", bad, err)
		}
	}
	got.Name, got.Warps = "", []int{0}
	if args, _ = buildArgs(got, IO{Backends: binaryBackends}.registry()); !strings.Contains(strings.Join(args, " "), "--name strided-put --out d --arch 80,90 --warps 4,8,16,32") {
		t.Errorf("defaults: %q", args)
	}
}

// The build refuses a kernel that does not fit before it needs Triton: the file is read
// by the build script, as on the GPU machine.
func TestKernelsBuildRefusesAParameter(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.py")
	src := "import triton\nimport triton.language as tl\nSYMMEM_KERNELS = {\"put\": \"p\"}\n\n@triton.jit\ndef p(dst, src, nbytes, chunk, peer: tl.int64, extra):\n    pass\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kernel, want string
	}{
		{"", "p (for put): parameter 'peer' is annotated tl.int64, symmem passes i32"},
		{"put=nope", "no function 'nope' for put (module-level @triton.jit functions: p)"},
		{"all-reduce=p", "p (for all-reduce): parameter 1 is 'dst', symmem passes 'send' (*bf16) there: all_reduce_bf16 takes (send, recv, scratch, nelem, sig, seq, me, n)"},
		{"all-reduce:float32=p", "p (for all-reduce:float32): parameter 1 is 'dst', symmem passes 'send' (*fp32) there: all_reduce_f32 takes (send, recv, scratch, nelem, sig, seq, me, n)"},
	} {
		o := &KernelsBuildOptions{File: file, Arch: []int{90}, Warps: DefaultBuildWarps, Out: filepath.Join(dir, "out"), Script: buildScriptPath}
		if tc.kernel != "" {
			o.Kernels = []string{tc.kernel}
		}
		var out, errb bytes.Buffer
		err := runKernelsBuild(context.Background(), o, IO{Out: &out, Err: &errb})
		if err == nil || symmem.ExitCode(err) != exitcode.Usage || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("got %v (exit %d), want one line with %q", err, symmem.ExitCode(err), tc.want)
		}
		if errb.Len() > 0 {
			t.Errorf("stderr besides the error: %s", errb.String())
		}
	}
}

// A file that declares no kernels is told to give symmem's flag, --kernel (the script's
// message named its own, --op, which symmem kernels build does not take).
func TestKernelsBuildNamesItsFlag(t *testing.T) {
	needPython(t)
	file := filepath.Join(t.TempDir(), "none.py")
	if err := os.WriteFile(file, []byte("import triton\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := &KernelsBuildOptions{File: file, Arch: []int{90}, Warps: DefaultBuildWarps, Out: filepath.Join(t.TempDir(), "out"), Script: buildScriptPath}
	err := runKernelsBuild(context.Background(), o, IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	want := `declares no kernels: add SYMMEM_KERNELS = {"put": "my_put"} to it or give --kernel put=my_put`
	if err == nil || symmem.ExitCode(err) != exitcode.Usage || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("got %v (exit %d), want it to end %q", err, symmem.ExitCode(err), want)
	}
	// The flag it names works.
	o.Kernels = []string{"put=my_put"}
	err = runKernelsBuild(context.Background(), o, IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	if want := "no function 'my_put' for put"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("with --kernel put=my_put: %v, want it to say %q", err, want)
	}
}

// Without Triton (this machine, CI), build says what is missing and where to build,
// in one line, exit 2, after the file passed its checks.
func TestKernelsBuildWithoutTriton(t *testing.T) {
	needPython(t)
	if exec.Command("python3", "-c", "import triton, nvidia.nvshmem").Run() == nil {
		t.Skip("Triton and the NVSHMEM wheel are installed here")
	}
	// Every example passes the file's checks (the all-reduce ones with the wait limit and
	// mailbox after their signature).
	for _, example := range []string{"strided_put.py", "wrong_put.py", "one_shot_all_reduce.py", "wrong_all_reduce.py", "push_collectives.py", "moe_all_to_all.py", "seed_put.py", "torch_kernels.py"} {
		out := filepath.Join(t.TempDir(), "out")
		o := &KernelsBuildOptions{File: "../../examples/" + example, Arch: []int{90}, Warps: DefaultBuildWarps, Out: out} // the embedded script
		var stdout, errb bytes.Buffer
		err := runKernelsBuild(context.Background(), o, IO{Out: &stdout, Err: &errb})
		if err == nil || symmem.ExitCode(err) != exitcode.Usage || strings.Contains(err.Error(), "\n") ||
			!strings.Contains(err.Error(), "this machine cannot build kernels: triton (import triton:") ||
			!strings.Contains(err.Error(), "pip install triton nvidia-nvshmem-cu13") {
			t.Fatalf("%s: got %v (exit %d)", example, err, symmem.ExitCode(err))
		}
		if strings.Contains(err.Error()+errb.String(), "Traceback") {
			t.Errorf("%s: a Python stack: %s", example, errb.String())
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: the refused build made its --out directory", example)
		}
	}
}

// kernels build runs the build script the binary embeds, beside the NVSHMEM bindings
// users' kernels import, laid out as in a checkout, so an installed binary builds too;
// the copies are the checkout's (a binary built from this tree runs this tree's
// script), and the directory goes when the build ends.
func TestEmbeddedBuildScript(t *testing.T) {
	script, cleanup, err := kernelbuild.WriteScript()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(filepath.Dir(script))
	for embedded, checkout := range map[string]string{
		script: buildScriptPath,
		filepath.Join(dir, "kernels", "triton", "nvshmem_device.py"): "../../kernels/triton/nvshmem_device.py",
		filepath.Join(dir, "kernels", "triton", "nvshmem_torch.py"):  "../../kernels/triton/nvshmem_torch.py",
		filepath.Join(dir, "kernels", "triton", "torch_plan.py"):     "../../kernels/triton/torch_plan.py",
	} {
		got, err := os.ReadFile(embedded)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(checkout)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not %s", embedded, checkout)
		}
	}
	cleanup()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the build script's directory %s is still there: %v", dir, err)
	}
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	if _, _, err := kernelbuild.WriteScript(); err == nil || !strings.Contains(err.Error(), "kernels build: a directory for the build script:") {
		t.Errorf("with TMPDIR missing: %v", err)
	}
	o := &KernelsBuildOptions{File: "../../examples/strided_put.py", Arch: []int{90}, Warps: DefaultBuildWarps, Out: filepath.Join(t.TempDir(), "out")}
	if err := runKernelsBuild(context.Background(), o, IO{Out: io.Discard, Err: io.Discard}); symmem.ExitCode(err) != exitcode.Usage || !strings.Contains(err.Error(), "set TMPDIR to a directory you can write") {
		t.Errorf("kernels build with TMPDIR missing: %v (exit %d)", err, symmem.ExitCode(err))
	}
}

// The build script holds no table of signatures of its own: it reads this binary's
// (kernels.SignaturesJSON, the file kernels build passes it) and derives the same
// kernels, parameters and types, which waits may take the bounded pair, and which run
// one warp.
func TestBuildScriptReadsTheGoSignatures(t *testing.T) {
	needPython(t)
	sigs, err := kernelbuild.WriteSignatures(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	prog := `import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("bk", sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
if hasattr(m, "USER_SIGNATURES"):
    print("the script holds a table of its own")
s = m.Signatures.read(sys.argv[2])
types = m.GO_TYPES
print(json.dumps({op: [k, [[n, types[t]] for n, t in sig.items()], op in s.waits, k in s.one_warp] for op, (k, sig) in s.kernels.items()}))`
	b, err := exec.Command("python3", "-c", prog, buildScriptPath, sigs).Output()
	if err != nil {
		t.Fatal(err)
	}
	var py map[string][4]any
	if err := json.Unmarshal(b, &py); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if len(py) != len(kernels.OpKernels()) {
		t.Errorf("python has %d ops, Go %d", len(py), len(kernels.OpKernels()))
	}
	for _, uk := range kernels.UserKernels() {
		v, ok := py[uk.Key]
		if !ok {
			t.Errorf("%s: not in the script's table", uk.Key)
			continue
		}
		if k := v[0].(string); k != uk.Kernel {
			t.Errorf("op %s: python kernel %s, Go %s", uk.Key, k, uk.Kernel)
		}
		var got []kernels.Param
		for _, p := range v[1].([]any) {
			pp := p.([]any)
			got = append(got, kernels.Param{Name: pp[0].(string), Type: pp[1].(string)})
		}
		if !reflect.DeepEqual(got, kernels.Signatures()[uk.Kernel]) {
			t.Errorf("%s: python %v, Go %v", uk.Kernel, got, kernels.Signatures()[uk.Kernel])
		}
		if v[2].(bool) != uk.Waits || v[3].(bool) != uk.OneWarp {
			t.Errorf("%s: python waits %v, one warp %v; Go %v, %v", uk.Key, v[2], v[3], uk.Waits, uk.OneWarp)
		}
	}
	// Without the table, a user's file is refused in one line that says where it comes from.
	o := &KernelsBuildOptions{File: "../../examples/strided_put.py", Arch: []int{90}, Warps: DefaultBuildWarps, Out: filepath.Join(t.TempDir(), "out"), Check: true}
	args, err := buildArgs(o, IO{Backends: binaryBackends}.registry())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("python3", append([]string{buildScriptPath}, args...)...).CombinedOutput()
	if want := "build-kernels: --user needs --signatures FILE, the table of the kernels symmem launches (pkg/kernels); symmem kernels build FILE.py writes it and passes it"; err == nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("without --signatures: %v: %s, want %q", err, out, want)
	}
}

func TestKernelsList(t *testing.T) {
	for _, tc := range []struct {
		name string
		host kernels.Host
		want []string
	}{
		{"H200s", kernels.Host{CCs: []int{90, 90}, Lib: [3]int{3, 4, 5}}, []string{
			"this machine: GPU 0 sm_90, GPU 1 sm_90; NVSHMEM host library 3.4.5",
			"│ " + userKernels + " │ myput    │ put_block        │ put         │ sm_90a     │ 8     │ cubin  │ 3.6.0  │ 3.4.5   │ yes: GPU 0, GPU 1 (cubin)",
			"│ " + userKernels + " │ myput    │ get_block        │ get         │ sm_90a     │ 8     │ cubin  │ 3.6.0  │ 3.4.5   │ yes: GPU 0, GPU 1 (cubin)",
		}},
		{"older NVSHMEM", kernels.Host{CCs: []int{90}, Lib: [3]int{3, 3, 9}}, []string{
			"myput    │ put_block        │ put         │ sm_90a     │ 8     │ cubin  │ 3.6.0  │ 3.4.5   │ device library 3.4.5 is newer than host library 3.3.9: install NVSHMEM >= 3.4 or rebuild against 3.3",
		}},
		{"no GPU", kernels.Host{NoGPU: "NVIDIA driver not found"}, []string{
			"this machine: no GPU here (NVIDIA driver not found)",
			"myput    │ put_block        │ put         │ compute_80 │ 8     │ ptx    │ 3.6.0  │ 3.4.5   │ no GPU here",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			o := &KernelsListOptions{Dir: userKernels, All: true, Host: func(string) kernels.Host { return tc.host }}
			if err := runKernelsList(o, IO{Out: &out, Err: &out}); err != nil {
				t.Fatal(err)
			}
			// Column widths follow the longest kernel and op names of the catalogue.
			squash := func(s string) string { return regexp.MustCompile(` +`).ReplaceAllString(s, " ") }
			for _, w := range tc.want {
				if !strings.Contains(squash(out.String()), squash(w)) {
					t.Errorf("missing %q in\n%s", w, out.String())
				}
			}
		})
	}
	var out bytes.Buffer
	o := &KernelsListOptions{Dir: userKernels, JSON: true, Host: func(string) kernels.Host { return kernels.Host{CCs: []int{80}, Lib: [3]int{3, 4, 5}} }}
	if err := runKernelsList(o, IO{Out: &out, Err: &out}); err != nil {
		t.Fatal(err)
	}
	var l KernelList
	if err := json.Unmarshal(out.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	loads := map[string]bool{}
	for _, e := range l.Kernels {
		if e.Impl == "myput" {
			loads[e.Kernel+" "+e.Format] = e.Loadable
		}
	}
	if want := map[string]bool{"put_block ptx": true, "put_block cubin": false, "get_block cubin": false}; !reflect.DeepEqual(loads, want) {
		t.Errorf("loadable on an A100: %v, want %v", loads, want)
	}
}

// A rebuild removes the earlier build's artifacts of its name, never the user's
// source, even when --out is the source's own directory and the name is the file's.
func TestBuildScriptKeepsTheSource(t *testing.T) {
	needPython(t)
	dir, stubs := t.TempDir(), t.TempDir()
	// Stand-ins for triton and the NVSHMEM wheel: enough to get past the tool check,
	// not enough to build (the build fails after the clean-up, as it may for real).
	for _, f := range []string{"triton/__init__.py", "nvidia/__init__.py", "nvidia/nvshmem/__init__.py"} {
		os.MkdirAll(filepath.Join(stubs, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(stubs, f), []byte("__version__ = '0'\n"), 0o644)
	}
	src, err := os.ReadFile("../../examples/strided_put.py")
	if err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(dir, "mine.py")
	os.WriteFile(mine, src, 0o644)
	stale := filepath.Join(dir, "mine.put_block.w8.sm90.cubin")
	os.WriteFile(stale, []byte("old"), 0o644)
	other := filepath.Join(dir, "mine.notes")
	os.WriteFile(other, []byte("mine"), 0o644)
	sigs, err := kernelbuild.WriteSignatures(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", buildScriptPath, "--user", mine, "--signatures", sigs, "--name", "mine", "--out", dir)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+stubs)
	out, _ := cmd.CombinedOutput()
	if _, err := os.Stat(mine); err != nil {
		t.Fatalf("the build removed the source: %v\n%s", err, out)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the build removed a file that is not an artifact: %v", err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("the earlier build's artifact is still there\n%s", out)
	}
}

// A build stopped by a signal (its context ends) kills the script and what it started,
// and says so with the interrupted status (it said "build-kernels.py failed (exit -1)",
// exit 1), leaving no build directory behind.
func TestKernelsBuildStopped(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "python3"), []byte("#!/bin/sh\nsleep 30 &\nsleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	o := &KernelsBuildOptions{File: "../../examples/strided_put.py", Arch: []int{90}, Warps: DefaultBuildWarps, Out: filepath.Join(t.TempDir(), "out")}
	start := time.Now()
	err := runKernelsBuild(ctx, o, IO{Out: io.Discard, Err: io.Discard})
	// Within WaitDelay's 2 s: the group's kill ended the child holding the pipe (without
	// it the wait ran the 2 s out and left the child running).
	if symmem.ExitCode(err) != exitcode.Interrupted || !strings.Contains(err.Error(), "kernels build: stopped;") || time.Since(start) > 1900*time.Millisecond {
		t.Errorf("stopped after 0.3 s: %v (exit %d) after %s", err, symmem.ExitCode(err), time.Since(start))
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
}

// A compile that fails is told in one line, the last of the script's stderr (what
// kernels build says): where in the kernel's source, from the innermost of Triton's
// wrapped CompilationErrors that knows, and the first cause, with a hint for a binding
// given the wrong argument types (the MoE example's first build ended on "    ^").
// Triton is not here: the chain is built as Triton 3.6's is (src, node.lineno).
func TestBuildScriptSaysWhyACompileFailed(t *testing.T) {
	needPython(t)
	prog := `import importlib.util, sys
spec = importlib.util.spec_from_file_location("bk", sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
class CompilationError(Exception):
    def __init__(self, src, node, msg):
        super().__init__("at %d:0:\n%s" % (node.lineno, msg)); self.src, self.node = src, node
class Node:
    def __init__(self, n): self.lineno = n
def extern_elementwise(table, types): return table[types]
def callee():
    try:
        extern_elementwise({}, ("int64", "int32"))
    except KeyError as e:
        raise CompilationError("def _meet(w):\n    nv.fence()\n    nv.putmem_signal_block(w, w, 0, w, 1, 9, 0)\n", Node(3), "") from e
def caller():
    try:
        callee()
    except CompilationError as e:
        raise CompilationError("def dispatch(a):\n    _meet(a)\n", Node(2), "") from e
try:
    caller()
except Exception as e:
    print(m.reason_of(e))
try:
    raise ValueError("plain\nsecond line")
except Exception as e:
    print(m.reason_of(e))
class CompileTimeAssertionFailure(Exception):
    def __init__(self):
        super().__init__("at 2:4:\ndef k(x):\n    tl.static_assert(x > 4, 'nelem must be > 4')\n    ^\nnelem must be > 4")
        self.error_message = "nelem must be > 4"
try:
    raise CompileTimeAssertionFailure()
except Exception as e:
    print(m.reason_of(e))
import types
open(sys.argv[2], "w").write("import nvshmem_device as nv\n\ndef k():\n    nv.fence()\n    nv.no_such_binding(1)\n")
try:
    types.ModuleType("nvshmem_device").no_such_binding
except AttributeError as e:
    print(m.reason_of(e, sys.argv[2]))`
	out, err := exec.Command("python3", "-c", prog, buildScriptPath, filepath.Join(t.TempDir(), "k.py")).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := "at `nv.putmem_signal_block(w, w, 0, w, 1, 9, 0)`: KeyError: ('int64', 'int32') (no binding takes these argument types: addresses and byte counts are int64, ranks int32, and a literal 0 is an int32: write tl.full([], 0, tl.int64))\nValueError: plain\n" +
		"CompileTimeAssertionFailure: nelem must be > 4\n" +
		"at line 5 `nv.no_such_binding(1)`: AttributeError: module 'nvshmem_device' has no attribute 'no_such_binding'\n"
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// kernels build --check checks a file's declarations and signatures with Python alone
// (no Triton: this machine, CI), says which function serves which op as which kernel,
// and compiles nothing; a file that does not fit is refused as a build refuses it.
func TestKernelsBuildCheck(t *testing.T) {
	needPython(t)
	for example, want := range map[string]string{
		"strided_put.py":    "strided_put(dst, src, nbytes, chunk, peer) serves put as strided-put.put_block",
		"moe_all_to_all.py": "dispatch(send, recv, scratch, slots, origin, tokens, nslots, hidden, sig, seq, me, n, limit_ns, mailbox) serves dispatch as moe-all-to-all.moe_dispatch",
		"tiled_matmul_reduce_scatter.py": "matmul_reduce_scatter(a_ptr, b_ptr, c_ptr, scratch_ptr, m_local, n, k, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, rank, peer, ranks, step) " +
			"serves matmul-reduce-scatter as tiled-matmul-reduce-scatter.matmul_reduce_scatter_bf16\n",
	} {
		out := filepath.Join(t.TempDir(), "out")
		o := &KernelsBuildOptions{File: "../../examples/" + example, Arch: []int{90}, Warps: DefaultBuildWarps, Out: out, Check: true}
		var stdout bytes.Buffer
		if err := runKernelsBuild(context.Background(), o, IO{Out: &stdout, Err: io.Discard}); err != nil || !strings.Contains(stdout.String(), want) {
			t.Errorf("%s: %v, printed %q", example, err, stdout.String())
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: --check made the --out directory", example)
		}
	}
	// A waiting kernel without the wait limit and mailbox is told so.
	ag := filepath.Join(t.TempDir(), "ag.py")
	if err := os.WriteFile(ag, []byte("import triton\nSYMMEM_KERNELS = {\"all-gather\": \"ag\"}\n@triton.jit\ndef ag(send, recv, scratch, nelem, sig, seq, me, n):\n    pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var agOut bytes.Buffer
	o := &KernelsBuildOptions{File: ag, Arch: []int{90}, Warps: DefaultBuildWarps, Out: filepath.Join(t.TempDir(), "out"), Check: true}
	if err := runKernelsBuild(context.Background(), o, IO{Out: &agOut, Err: io.Discard}); err != nil ||
		!strings.Contains(agOut.String(), "serves all-gather as ag.all_gather; it takes no limit_ns and mailbox: it cannot give up on a peer that never comes") {
		t.Errorf("an unbounded all-gather: %v, %q", err, agOut.String())
	}
	// A file with a coding line is read as Python reads it.
	latin := filepath.Join(t.TempDir(), "latin.py")
	src := "# -*- coding: latin-1 -*-\n# caf\xe9\nimport triton\nSYMMEM_KERNELS = {\"put\": \"p\"}\n@triton.jit\ndef p(dst, src, nbytes, chunk, peer):\n    pass\n"
	if err := os.WriteFile(latin, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	o = &KernelsBuildOptions{File: latin, Arch: []int{90}, Warps: DefaultBuildWarps, Out: filepath.Join(t.TempDir(), "out"), Check: true}
	if err := runKernelsBuild(context.Background(), o, IO{Out: io.Discard, Err: io.Discard}); err != nil {
		t.Errorf("a latin-1 file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.py")
	if err := os.WriteFile(bad, []byte("import triton\nSYMMEM_KERNELS = {\"put\": \"p\"}\n@triton.jit\ndef p(dst, src, nbytes, extra, peer):\n    pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o = &KernelsBuildOptions{File: bad, Arch: []int{90}, Warps: DefaultBuildWarps, Out: filepath.Join(t.TempDir(), "out"), Check: true}
	err := runKernelsBuild(context.Background(), o, IO{Out: io.Discard, Err: io.Discard})
	if symmem.ExitCode(err) != exitcode.Usage || !strings.Contains(err.Error(), "p (for put): parameter 4 is 'extra', symmem passes 'chunk' (i64) there") {
		t.Errorf("a parameter that does not fit: %v (exit %d)", err, symmem.ExitCode(err))
	}
}

// binaryBackends are the backends cmd/symmem runs.
var binaryBackends = symmem.Backends()
