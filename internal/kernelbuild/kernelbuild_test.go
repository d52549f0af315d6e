package kernelbuild

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symmem/symmem/pkg/kernels"
)

// packEnv makes the test binary the symmem the build script packs with: `symmem
// kernels pack DIR`, done by kernels.Pack as the command does it.
const packEnv = "SYMMEM_TEST_PACK"

func TestMain(m *testing.M) {
	if os.Getenv(packEnv) == "1" {
		args := os.Args[1:]
		if len(args) != 3 || args[0] != "kernels" || args[1] != "pack" {
			fmt.Fprintf(os.Stderr, "want kernels pack DIR, got %q\n", args)
			os.Exit(2)
		}
		done, err := kernels.Pack(args[2])
		fmt.Printf("kernels pack: %d files\n", len(done))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 here")
	}
}

// writeArtifacts is the build script's own last steps, run on made-up kernels: its
// write_artifact writes a cubin, a PTX and a CUDA module two kernels share, with their
// sidecars, and its pack compresses them with the symmem it finds.
const writeArtifacts = `import importlib.util, sys
spec = importlib.util.spec_from_file_location("bk", sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
out = sys.argv[2]
def meta(impl, kernel, fmt, arch):
    return {"impl": impl, "kernel": kernel, "entry": kernel, "params": [{"name": "dst", "type": "ptr"}], "num_warps": 0,
            "target": ("sm_%d" if fmt == "cubin" else "compute_%d") % arch, "arch": arch, "format": fmt, "uses_nvshmem": False}
cubin = bytes(range(256)) * 64 + b"\0" * 4096
m.write_artifact(out, "triton.put_block.w4.sm90", cubin, meta("triton", "put_block", "cubin", 90), "cubin")
m.write_artifact(out, "triton.put_block.w4.sm80", "//\n.version 8.7\n.target sm_80\n" * 50, meta("triton", "put_block", "ptx", 80), "ptx")
for k in ("put_block", "get_block"):
    m.write_artifact(out, "cuda.%s.sm90" % k, cubin[::-1], meta("cuda", k, "cubin", 90), "cubin", module="cuda.symmem_nvshmem.sm90")
failed = m.pack(out, m.find_packer())
if failed:
    print(failed)
    sys.exit(1)
`

// The build script writes what Go reads: the kernels it writes and packs (with the
// symmem it finds, as a build on the GPU machine does) read back through pkg/kernels,
// each matching the sha256 Python recorded of its plain bytes, and none is left plain.
func TestBuildScriptPacksWhatGoReads(t *testing.T) {
	needPython(t)
	script := buildScript(t)
	out := t.TempDir()
	cmd := exec.Command("python3", "-c", writeArtifacts, script, out)
	cmd.Env = append(os.Environ(), "SYMMEM_BIN="+os.Args[0], packEnv+"=1")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if !strings.Contains(string(b), "kernels pack: 3 files") {
		t.Errorf("the script printed %q, want what kernels pack said", b)
	}
	for _, pat := range []string{"*.cubin", "*.ptx"} {
		if plain, _ := filepath.Glob(filepath.Join(out, pat)); len(plain) > 0 {
			t.Errorf("left plain: %v", plain)
		}
	}
	c, err := kernels.Load(os.DirFS(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Artifacts) != 4 {
		t.Fatalf("%d artifacts, want 4", len(c.Artifacts))
	}
	for _, a := range c.Artifacts {
		if err := a.Verify(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(filepath.Join(out, a.File+kernels.PackedSuffix)); err != nil {
			t.Error(err)
		}
	}
	a, err := c.Select("triton", "put_block", 0, 120)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := a.Data(); err != nil || !bytes.HasPrefix(d, []byte("//\n.version 8.7")) || d[len(d)-1] != 0 {
		t.Errorf("the PTX: %.20q (%v), want its text and the NUL the driver needs", d, err)
	}
}

// A build of symmem's kernels where no symmem can pack them is refused before anything
// is compiled; a pack that fails fails the build.
func TestBuildScriptNeedsSymmemToPack(t *testing.T) {
	needPython(t)
	script := buildScript(t)
	// The interpreter itself: python3 on the PATH may be a shim that needs the PATH.
	py, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(strings.TrimSpace(string(py)), script, "--out", t.TempDir())
	cmd.Env = []string{"PATH=" + t.TempDir(), "HOME=" + os.Getenv("HOME")}
	b, err := cmd.CombinedOutput()
	want := "build-kernels: no symmem binary to compress the kernels with (symmem kernels pack): build one (make build, or go build -o bin/symmem ./cmd/symmem where Go is), copy it to bin/symmem or set SYMMEM_BIN"
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || strings.TrimSpace(string(b)) != want {
		t.Errorf("%v: %s\nwant exit 2 and %q", err, b, want)
	}

	prog := `import importlib.util, sys
spec = importlib.util.spec_from_file_location("bk", sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
print(m.pack(sys.argv[2], "false"))`
	b, err = exec.Command("python3", "-c", prog, script, t.TempDir()).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "false kernels pack") || !strings.Contains(string(b), "failed (exit 1): the kernels in it are not compressed") {
		t.Errorf("a failing pack: %v: %s", err, b)
	}
}

// A rebuild of a user's kernels removes the earlier build's, compressed ones too (a
// directory the user packed), so that none is read in place of the new one.
func TestUserRebuildRemovesPackedKernels(t *testing.T) {
	needPython(t)
	script := buildScript(t)
	dir, stubs := t.TempDir(), t.TempDir()
	// Stand-ins for triton and the NVSHMEM wheel: enough to get past the tool check,
	// not enough to build (the build fails after the clean-up).
	for _, f := range []string{"triton/__init__.py", "nvidia/__init__.py", "nvidia/nvshmem/__init__.py"} {
		os.MkdirAll(filepath.Join(stubs, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(stubs, f), []byte("__version__ = '0'\n"), 0o644)
	}
	mine := filepath.Join(dir, "mine.py")
	if err := os.WriteFile(mine, []byte("import triton\nimport triton.language as tl\n\nSYMMEM_KERNELS = {\"put\": \"my_put\"}\n\n\n@triton.jit\ndef my_put(dst, src, nbytes, chunk, peer):\n    pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stale := []string{"mine.put_block.w8.sm90.cubin.zst", "mine.put_block.w8.sm80.ptx.zst", "mine.put_block.w8.sm90.cubin.json"}
	for _, f := range append(stale, "other.put_block.w8.sm90.cubin.zst") {
		os.WriteFile(filepath.Join(dir, f), []byte("old"), 0o644)
	}
	sigs, err := WriteSignatures(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", script, "--user", mine, "--signatures", sigs, "--name", "mine", "--out", dir)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+stubs)
	out, _ := cmd.CombinedOutput()
	for _, f := range stale {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("the earlier build's %s is still there\n%s", f, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "other.put_block.w8.sm90.cubin.zst")); err != nil {
		t.Errorf("another implementation's kernel was removed: %v", err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("the source was removed: %v", err)
	}
}

// A compile links each extern library (NVSHMEM's, libdevice) whole once and keeps the
// part it took; a later compile links that part only where it provides every call (a
// function the whole library lacks, such as vprintf, counts once a compile has seen it
// missing) and the module flags match, and gets the same functions the whole library
// gives. The kept part names no kernel (Triton takes every function a library defines
// for the library's, and would make a kernel of that name internal) and keeps no
// kernel's body, and one cut short is replaced by the whole library's link.
func TestPrunedLibraries(t *testing.T) {
	needPython(t)
	script := buildScript(t)
	put := []string{"nvshmem_putmem", "llvm.nvvm.read.ptx.sreg.tid.x"}
	putQuiet := []string{"nvshmem_putmem", "nvshmem_quiet"}
	quiet := []string{"nvshmem_quiet"}
	quietPrintf := []string{"nvshmem_quiet", "vprintf"}
	putExp := []string{"nvshmem_putmem", "__nv_expf"}
	putSin := []string{"nvshmem_putmem", "__nv_sinf"}
	const whole, pruned = "libnvshmem_device.ll libdevice.10.ll", "pruned libdevice.10.ll"
	steps := []struct {
		Kernel string   `json:"kernel,omitempty"`
		Calls  []string `json:"calls,omitempty"`
		FTZ    int      `json:"ftz"`
		Env    string   `json:"env,omitempty"`
		Break  bool     `json:"break,omitempty"`
		want   string   // how NVSHMEM's library was linked: whole or pruned ("" where pruning is off)
		from   string   // the libraries linked, in Triton's order (NVSHMEM's, libdevice), each whole or pruned
		fns    string   // the functions linked in
	}{
		// A name LLVM prints quoted keeps no part: my_put after it links whole.
		{Kernel: "my put", Calls: put, FTZ: 1, want: "whole", from: whole, fns: "nvshmem_putmem nvshmemi_transfer"},
		{Kernel: "my_put", Calls: put, FTZ: 1, want: "whole", from: whole, fns: "nvshmem_putmem nvshmemi_transfer"},
		{Kernel: "my_put", Calls: put, FTZ: 1, want: "pruned", from: pruned, fns: "nvshmem_putmem nvshmemi_transfer"},
		{Kernel: "my_put", Calls: putQuiet, FTZ: 1, want: "whole", from: whole, fns: "nvshmem_putmem nvshmem_quiet nvshmemi_transfer"},
		{Kernel: "other", Calls: quiet, FTZ: 1, want: "pruned", from: pruned, fns: "nvshmem_quiet"},
		{Kernel: "other", Calls: quietPrintf, FTZ: 1, want: "whole", from: whole, fns: "nvshmem_quiet"},
		{Kernel: "other", Calls: quietPrintf, FTZ: 1, want: "pruned", from: pruned, fns: "nvshmem_quiet"},
		{Kernel: "other", Calls: quiet, FTZ: 0, want: "whole", from: whole, fns: "nvshmem_quiet"},
		// What the library lacks is kept across kernels of the same calls: a, b, a.
		{Kernel: "my_put", Calls: putExp, FTZ: 1, want: "whole", from: whole, fns: "__nv_expf nvshmem_putmem nvshmemi_transfer"},
		{Kernel: "my_put", Calls: putSin, FTZ: 1, want: "whole", from: whole, fns: "__nv_sinf nvshmem_putmem nvshmemi_transfer"},
		{Kernel: "my_put", Calls: putExp, FTZ: 1, want: "pruned", from: pruned, fns: "__nv_expf nvshmem_putmem nvshmemi_transfer"},
		{Kernel: "my_put", Calls: putSin, FTZ: 1, want: "pruned", from: pruned, fns: "__nv_sinf nvshmem_putmem nvshmemi_transfer"},
		{Kernel: "my_put", Calls: put, FTZ: 1, Env: "0", want: "", from: whole, fns: "nvshmem_putmem nvshmemi_transfer"},
		{Break: true},
		{Kernel: "my_put", Calls: put, FTZ: 1, want: "whole", from: whole, fns: "nvshmem_putmem nvshmemi_transfer"},
		{Kernel: "my_put", Calls: put, FTZ: 1, want: "pruned", from: pruned, fns: "nvshmem_putmem nvshmemi_transfer"},
	}
	arg, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("python3", "testdata/pruned.py", script, t.TempDir(), string(arg)).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	i := 0
	for n, s := range steps {
		if s.Break {
			continue
		}
		if i >= len(lines) {
			t.Fatalf("%d lines for %d compiles:\n%s", len(lines), i+1, out)
		}
		var got struct {
			Linked    *string
			From      []string
			Functions []string
			Kept      map[string]map[string]string // a kept library's functions, a kernel's with its body
		}
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("%v: %s", err, lines[i])
		}
		i++
		linked := ""
		if got.Linked != nil {
			linked = *got.Linked
		}
		var from []string
		for _, f := range got.From {
			if strings.HasSuffix(f, ".ll") && !strings.HasPrefix(f, "lib") {
				f = "pruned"
			}
			from = append(from, f)
		}
		if linked != s.want || strings.Join(from, " ") != s.from || strings.Join(got.Functions, " ") != s.fns {
			t.Errorf("compile %d (%s calling %v, ftz %d, %s=%q): NVSHMEM's library linked %q, from %v (%v), want %q from %s (%s)",
				n+1, s.Kernel, s.Calls, s.FTZ, "SYMMEM_NVSHMEM_PRUNED", s.Env, linked, got.From, got.Functions, s.want, s.from, s.fns)
		}
		for lib, fns := range got.Kept {
			for f, body := range fns {
				if f == "my_put" || f == "other" {
					t.Errorf("compile %d: the kept library %s defines the kernel %s", n+1, lib, f)
				}
				if strings.HasPrefix(f, "symmem.") && body != "  unreachable\n" {
					t.Errorf("compile %d: the kept library %s keeps the kernel's body as %s:\n%s", n+1, lib, f, body)
				}
			}
		}
	}
}

// The same with LLVM's own linker (llvm-link --only-needed links as Triton's
// link_extern_libs does) on modules shaped as Triton's and NVSHMEM's: a kernel edited,
// and another kernel, linked against the part my_put kept give the module the whole
// library gives, to the byte, and every module and kept part passes LLVM's verifier,
// debug info included (a kept part whose debug info is broken would lose it, with a
// warning, in every compile that links it). A module with a function of its own named
// as one of the library's (the linker renames the module's, or binds the library's
// calls to a kernel of that name) leaves no part.
func TestPrunedLibrariesWithLLVM(t *testing.T) {
	needPython(t)
	for _, tool := range []string{"llvm-link", "llvm-as"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here (Debian: apt-get install llvm)", tool)
		}
	}
	script := buildScript(t)
	out, err := exec.Command("python3", "testdata/pruned_llvm.py", script, t.TempDir(), "testdata/llvm").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"collide: linked whole, 0 kept parts\n", "extkern: linked whole, 0 kept parts\n", "my_put: linked whole\n", "my_put_edited: linked pruned, the same module\n",
		"other: linked pruned, the same module\n", "kept part verified: "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// Every compile of a worker installs the pruned link and the stage timing: the second
// time changes nothing, so a link is pruned (and timed) once, not wrapped again each
// compile. Against a stand-in of Triton's modules.
func TestPrunedLinkInstalledOnce(t *testing.T) {
	needPython(t)
	script := buildScript(t)
	stubs := t.TempDir()
	for f, text := range map[string]string{
		"triton/__init__.py":              "",
		"triton/_C/__init__.py":           "",
		"triton/_C/libtriton/__init__.py": "from . import llvm\n",
		"triton/_C/libtriton/llvm.py":     "def link_extern_libs(mod, paths):\n    pass\n\n\ndef optimize_module(*a):\n    pass\n",
		"triton/compiler/__init__.py":     "",
		"triton/compiler/compiler.py":     "def make_backend(target):\n    return None\n",
	} {
		os.MkdirAll(filepath.Join(stubs, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(stubs, f), []byte(text), 0o644)
	}
	const once = `import importlib.util, sys
spec = importlib.util.spec_from_file_location("bk", sys.argv[1]); bk = importlib.util.module_from_spec(spec); spec.loader.exec_module(bk)
from triton._C.libtriton import llvm
bk.prune_links(); bk.time_stages(); first = llvm.link_extern_libs
bk.prune_links(); bk.time_stages()
print("the same link" if llvm.link_extern_libs is first else "wrapped again")
`
	cmd := exec.Command("python3", "-c", once, script)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+stubs)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "the same link" {
		t.Errorf("%v: %s", err, out)
	}
}

// buildScript writes the build script (WriteScript) for a test, removed when it ends.
func buildScript(t *testing.T) string {
	t.Helper()
	script, cleanup, err := WriteScript()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return script
}
