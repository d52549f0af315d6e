package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backends"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/kernelbuild"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
)

// checkFile runs kernels build --check on a file with src (and, beside it, decl as
// FILE.symmem.json when not ""), returning what it printed and its error.
func checkFile(t *testing.T, src, decl string, opts ...func(*KernelsBuildOptions)) (string, error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.py")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if decl != "" {
		if err := os.WriteFile(filepath.Join(dir, "mine.symmem.json"), []byte(decl), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := &KernelsBuildOptions{File: file, Arch: []int{90}, Warps: DefaultBuildWarps, Out: filepath.Join(dir, "out"), Check: true, Script: buildScriptPath}
	for _, f := range opts {
		f(o)
	}
	var out bytes.Buffer
	err := runKernelsBuild(context.Background(), o, IO{Out: &out, Err: io.Discard})
	return out.String(), err
}

// The seed's file and a torch 2.11-style file pass --check unchanged, without torch or
// Triton: their kernels are found by the calls they make (no SYMMEM_KERNELS), their
// parameters matched by name, tl.constexpr sizes and peers specialised, and the kernels
// that test NVSHMEM itself are listed as not served.
func TestKernelsBuildCheckTorch(t *testing.T) {
	needPython(t)
	for file, want := range map[string][]string{
		"seed_put.py": {"put_kernel(dst_ptr, src_ptr, numel: tl.constexpr, peer: tl.constexpr, BLOCK_SIZE: tl.constexpr) serves put as seed-put.put_block: " +
			"dst_ptr=dst (address), src_ptr=src (address), numel=nbytes (tl.constexpr: sizes 8,1048576), peer=peer (tl.constexpr: ranks 0..7), " +
			"BLOCK_SIZE=0 (the body never reads it: any value); block 0 runs it (it reads no program id)"},
		"torch_kernels.py": {
			"my_put_kernel(dest, src, nelems, pe) serves put as torch-kernels.put_block: dest=dst (*int8), src=src (*int8), nelems=nbytes, pe=peer;",
			"my_get_kernel(dest, src, nelems, pe, nbi: tl.constexpr) serves get as torch-kernels.get_block: dest=dst (*int64), src=src (*int64), nelems=nbytes / 8, pe=peer, nbi=False;",
			"serves put-signal as torch-kernels.put_signal_block: dst=dst (*int8), src=src (*int8), size_bytes=nbytes, signal=sig, sig_val=1, sig_op=SIGNAL_ADD, peer=peer;",
			"my_signal_wait_until_kernel(signal, cmp_op, cmp_val) serves wait-signal as torch-kernels.wait_signal: signal=sig, cmp_op=CMP_GE, cmp_val=value;",
			"my_put_with_fence_kernel(dst1, src1, dst2, src2, flag_dst, flag_src, nelems, peer) serves put-flag as torch-kernels.put_flag_fence: dst1=dst (*int8), part 1 of 2,",
			"my_barrier_all_kernel() serves barrier as torch-kernels.barrier_all: one block runs it, launched cooperatively,",
		},
	} {
		out := filepath.Join(t.TempDir(), "out")
		o := &KernelsBuildOptions{File: "../../examples/" + file, Arch: []int{90}, Warps: DefaultBuildWarps, Out: out, Check: true, Sizes: []string{"8", "1M"}}
		var stdout bytes.Buffer
		if err := runKernelsBuild(context.Background(), o, IO{Out: &stdout, Err: io.Discard}); err != nil {
			t.Errorf("%s: %v", file, err)
		}
		for _, w := range want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%s: --check lacks %q in\n%s", file, w, stdout.String())
			}
		}
	}
}

// What cannot be matched is refused before anything is compiled, naming the parameter
// and the names symmem knows; a file of NVSHMEM tests alone is refused with each one's
// reason; the declaration file beside it is checked and used.
func TestKernelsBuildRefusesTorchParams(t *testing.T) {
	needPython(t)
	head := "import triton\nimport triton.language as tl\nimport torch.distributed._symmetric_memory._nvshmem_triton as nvshmem\n\n"
	for _, tc := range []struct {
		name, src, decl, want string
		sizes                 []string
	}{
		{"unknown", "@triton.jit\ndef k(dst, src, size_bytes, peer, stride):\n    nvshmem.putmem_block(dst, src, size_bytes * stride, peer)\n", "",
			"k (for put): parameter 'stride' means nothing symmem knows: name it one of dst (dst/dst_ptr/dest/dest_ptr/destination/out/out_ptr), " +
				"src (src/src_ptr/source/source_ptr/inp/inp_ptr), nbytes (nbytes/size_bytes/msg_size_bytes/num_bytes), nelems (numel/nelems/nelem/n_elements/nreduce/nelems_per_pe), " +
				"chunk (chunk/chunk_bytes), peer (peer/pe/target_pe/remote_pe/peer_pe), or give it a meaning or a value in mine.symmem.json", nil},
		{"constexpr without a value", "@triton.jit\ndef k(dest, src, nelems, pe, nbi: tl.constexpr):\n    if nbi:\n        nvshmem.get(dest, src, nelems, pe)\n", "",
			`k (for get): parameter 'nbi' means nothing symmem knows: set it with --const nbi=VALUE[,VALUE...] (a build each) or name it one of dst`, nil},
		{"constexpr without a value: the hint", "@triton.jit\ndef k(dest, src, nelems, pe, nbi: tl.constexpr):\n    if nbi:\n        nvshmem.get(dest, src, nelems, pe)\n", "",
			`or give it a meaning or a value in mine.symmem.json ({"k": {"params": {"nbi": VALUE}}})`, nil},
		{"constexpr symmem passes at run time", "@triton.jit\ndef k(dst, src, nbytes, chunk: tl.constexpr, peer):\n    nvshmem.putmem_block(dst, src, nbytes, peer)\n", "",
			"k (for put): parameter 'chunk' is a tl.constexpr, but symmem passes chunk at run time", nil},
		{"a meaning the op has not", "@triton.jit\ndef k(dst, src, n, peer):\n    nvshmem.putmem_block(dst, src, n, peer)\n", `{"k": {"params": {"n": "cmp_val"}}}`,
			"k (for put): parameter 'n' is given 'cmp_val' in mine.symmem.json, which put has not", nil},
		{"sizes that are not whole elements", "@triton.jit\ndef k(dest, src, nelems: tl.constexpr, pe):\n    nvshmem.put(dest, src, nelems, pe)\n", `{"k": {"dtype": "int64"}}`,
			"k (for put): --sizes 12 is not a whole number of int64 elements", []string{"12"}},
		{"tests only", "@triton.jit\ndef b():\n    nvshmem.sync_all()\n\n@triton.jit\ndef f():\n    nvshmem.fence()\n\n@triton.jit\ndef t(d, s, n):\n    nvshmem.put(d, s, n, 1)\n    nvshmem.barrier_all()\n", "",
			"no kernel symmem serves (b: it would serve barrier:sync-all: symmem's barrier op, variant sync-all (every rank's stamp stored in its own slots before sync_all and fetched from each rank after it), which symmem's user kernels do not serve yet; " +
				"f: it calls nvshmem.fence alone: it orders nothing whose data symmem could check (put-flag measures puts ordered by it); " +
				"t: it carries a test's own logic around nvshmem.barrier_all (it also calls nvshmem.put)", nil},
		{"a declaration of nothing", "@triton.jit\ndef k(dst, src, nbytes, pe):\n    nvshmem.putmem_block(dst, src, nbytes, pe)\n", `{"kk": {"op": "put"}}`,
			"mine.symmem.json names 'kk', which is no module-level @triton.jit function", nil},
		{"a default that is no literal", "@triton.jit\ndef k(dst, src, nbytes, pe, T: tl.constexpr = tl.int32):\n    nvshmem.putmem_block(dst, src, nbytes.to(T), pe)\n", "",
			"k (for put): parameter 'T' means nothing symmem knows", nil},
		{"a declaration's params that are no map", "@triton.jit\ndef k(dst, src, nbytes, pe):\n    nvshmem.putmem_block(dst, src, nbytes, pe)\n", `{"k": {"params": ["n"]}}`,
			"k: params must map a parameter to a meaning or a value", nil},
		{"a test chosen", "@triton.jit\ndef b():\n    nvshmem.barrier_all()\n", `{"b": {"op": "put"}}`,
			"b cannot serve put: it calls nvshmem.barrier_all, so it serves barrier", nil},
		{"another op chosen", "@triton.jit\ndef g(dest, src, nelems, pe):\n    nvshmem.get(dest, src, nelems, pe)\n", `{"g": {"op": "put"}}`,
			"g cannot serve put: it calls nvshmem.get, so it serves get", nil},
		{"a declaration's unknown key", "@triton.jit\ndef k(dst, src, nbytes, pe):\n    nvshmem.putmem_block(dst, src, nbytes, pe)\n", `{"k": {"grid": 1}}`,
			"k: unknown key 'grid': use op, params, dtype, blocks", nil},
	} {
		_, err := checkFile(t, head+tc.src, tc.decl, func(o *KernelsBuildOptions) { o.Sizes = tc.sizes })
		if symmem.ExitCode(err) != exitcode.Usage || err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v (exit %d), want one line with %q", tc.name, err, symmem.ExitCode(err), tc.want)
		}
	}
	// Two functions for one op: the first is the implementation's, the other a variant
	// of its own; --kernel keeps the one it names and lists the other.
	two := head + "@triton.jit\ndef p1(dst, src, nbytes, pe):\n    nvshmem.putmem_block(dst, src, nbytes, pe)\n\n@triton.jit\ndef p2(dst, src, nbytes, pe):\n    nvshmem.putmem_block(dst, src, nbytes, pe)\n"
	out, err := checkFile(t, two, "")
	for _, w := range []string{"p1(dst, src, nbytes, pe) serves put as mine.put_block:", "p2(dst, src, nbytes, pe) serves put as mine[fn=p2].put_block:"} {
		if err != nil || !strings.Contains(out, w) {
			t.Errorf("two puts: %v, printed %q, want %q", err, out, w)
		}
	}
	out, err = checkFile(t, two, "", func(o *KernelsBuildOptions) { o.Kernels = []string{"put=p2"} })
	if want := "p1 is not served: it serves put too, for which p2 was chosen (--kernel put=p2"; err != nil || !strings.Contains(out, want) || !strings.Contains(out, "p2(dst, src, nbytes, pe) serves put as mine.put_block") {
		t.Errorf("two puts, --kernel put=p2: %v, printed %q, want %q", err, out, want)
	}
	// A helper the kernel calls is no kernel of its own; its calls are the kernel's.
	out, err = checkFile(t, head+"@triton.jit\ndef _send(d, s, n, p):\n    nvshmem.put(d, s, n, p)\n\n@triton.jit\ndef k(dest, src, nelems, pe):\n    _send(dest, src, nelems, pe)\n", "")
	if want := "k(dest, src, nelems, pe) serves put as mine.put_block"; err != nil || !strings.Contains(out, want) || strings.Contains(out, "_send") {
		t.Errorf("a kernel with a helper: %v, printed %q, want %q and no _send", err, out, want)
	}
	// The declaration gives what no name can, and chooses the op.
	out, err = checkFile(t, head+"@triton.jit\ndef k(a, b, n, who, BLOCK: tl.constexpr):\n    nvshmem.get(a, b, n, who)\n",
		`{"k": {"op": "get", "params": {"a": "dst", "b": "src", "n": "nelems", "who": "peer", "BLOCK": 1024}, "dtype": "fp32", "blocks": "grid"}}`)
	if want := "k(a, b, n, who, BLOCK: tl.constexpr) serves get as mine.get_block: a=dst (*fp32), b=src (*fp32), n=nbytes / 4, who=peer, BLOCK=1024; every block runs it"; err != nil || !strings.Contains(out, want) {
		t.Errorf("a declared kernel: %v, printed %q, want %q", err, out, want)
	}
}

// The entries the build compiles call NVSHMEM as the kernels mean: run block by block
// against a stand-in for Triton that records each device call (testdata/faketriton),
// with symmem's module serving torch's API (no torch here).
func TestTorchEntriesCallNVSHMEM(t *testing.T) {
	needPython(t)
	const (
		ptr  = `"dst":[4096,"*i8"],"src":[8192,"*i8"]`
		sig  = `"sig":[512,"*u64"]`
		rest = `"chunk":[16,"i64"]`
	)
	sigs, err := kernelbuild.WriteSignatures(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const (
		flag = `"flag":[512,"*u64"],"flag_src":[640,"*u64"]`
		meet = `"slots":[1024,"*u64"],"wrong":[2048,"*u64"],"rnd":[1,"u64"],"me":[0,"i32"],"n":[2,"i32"]`
	)
	coll := func(ptr string) string {
		return `"send":[4096,"` + ptr + `"],"recv":[8192,"` + ptr + `"],"scratch":[0,"` + ptr + `"],"nelem":[16,"i64"],"sig":[512,"*u64"],"seq":[1,"i64"],"me":[0,"i32"],"n":[2,"i32"]`
	}
	for _, tc := range []struct {
		file, sizes, launches string
		want                  []string
		consts                []string
	}{
		{"internal/cli/" + pytorchTests, "8", `[["get_block_nbi_1",0,{` + ptr + `,"nbytes":[8,"i64"],` + rest + `,"peer":[1,"i32"]}],
			["get_block_nbi_0",0,{` + ptr + `,"nbytes":[8,"i64"],` + rest + `,"peer":[1,"i32"]}],
			["all_to_all",0,{` + coll("*i8") + `}],
			["all_to_all",1,{` + coll("*i8") + `}],
			["broadcast",0,{` + coll("*i8") + `,"root":[1,"i32"]}],
			["all_reduce_bf16",0,{` + coll("*bf16") + `}],
			["all_reduce_f32",0,{` + coll("*fp32") + `}],
			["all_reduce_bf16_max",0,{` + coll("*bf16") + `}],
			["all_reduce_f32_prod",0,{` + coll("*fp32") + `}],
			["all_reduce_f32_prod",0,{` + coll("*fp32") + `},1],
			["signal_op",0,{` + sig + `,"op":[10,"i32"],"value":[3,"u64"],"peer":[1,"i32"]}],
			["signal_op",0,{` + sig + `,"op":[9,"i32"],"value":[7,"u64"],"peer":[1,"i32"]},1],
			["signal_op",1,{` + sig + `,"op":[9,"i32"],"value":[7,"u64"],"peer":[1,"i32"]}],
			["put_flag_fence",0,{` + ptr + `,"nbytes":[8,"i64"],` + flag + `,"value":[3,"u64"],"peer":[1,"i32"]}],
			["put_flag_quiet",0,{` + ptr + `,"nbytes":[8,"i64"],` + flag + `,"value":[3,"u64"],"peer":[1,"i32"]}],
			["put_flag_quiet",1,{` + ptr + `,"nbytes":[8,"i64"],` + flag + `,"value":[3,"u64"],"peer":[1,"i32"]}],
			["wait_flag",0,{"flag":[512,"*u64"],"value":[3,"u64"]}],
			["barrier_all",0,{` + meet + `,"meet":[3,"i32"]}],
			["barrier_all",0,{` + meet + `,"meet":[1,"i32"]}],
			["barrier_all",0,{` + meet + `,"meet":[2,"i32"]}]]`,
			[]string{
				`[["nvshmemx_getmem_nbi_block", [4096, 8192, 8, 1], ["int64", "int64", "int64", "int32"]], ["nvshmem_quiet", [], []]]`,
				`[["nvshmemx_getmem_block", [4096, 8192, 8, 1], ["int64", "int64", "int64", "int32"]]]`,
				// team world, recv, send, nelem bytes
				`[["nvshmemx_alltoallmem_block", [0, 8192, 4096, 16], ["int32", "int64", "int64", "int64"]]]`,
				`[]`, // NVSHMEM's collective is called by block 0 alone
				`[["nvshmemx_broadcastmem_block", [0, 8192, 4096, 16, 1], ["int32", "int64", "int64", "int64", "int32"]]]`,
				`[["nvshmem_bfloat16_sum_reduce", [0, 8192, 4096, 16], ["int32", "int64", "int64", "int64"]]]`,
				`[["nvshmem_float_sum_reduce", [0, 8192, 4096, 16], ["int32", "int64", "int64", "int64"]]]`,
				// the operator each kernel was built for
				`[["nvshmem_bfloat16_max_reduce", [0, 8192, 4096, 16], ["int32", "int64", "int64", "int64"]]]`,
				`[["nvshmem_float_prod_reduce", [0, 8192, 4096, 16], ["int32", "int64", "int64", "int64"]]]`,
				`[]`, // thread 1: nvshmem_TYPE_OP_reduce is a one-thread collective, thread 0's
				// the signal op as symmem asks (an add of 3), once: thread 0's; a fence after
				`[["nvshmemx_signal_op", [512, 3, 10, 1], ["int64", "uint64", "int32", "int32"]], ["nvshmem_fence", [], []]]`,
				`[["nvshmem_fence", [], []]]`,
				`[]`, // block 1
				// the flag's value stored first; the message in two halves, each put after
				// a fence; then one int32 flag from flag_src
				`[["tl.store", [640, 3], ["*int32"]], ["tl.debug_barrier", [], []], ` +
					`["nvshmemx_putmem_block", [4096, 8192, 4, 1], ["int64", "int64", "int64", "int32"]], ["nvshmem_fence", [], []], ` +
					`["nvshmemx_putmem_block", [4100, 8196, 4, 1], ["int64", "int64", "int64", "int32"]], ["nvshmem_fence", [], []], ` +
					`["nvshmemx_putmem_block", [512, 640, 4, 1], ["int64", "int64", "int64", "int32"]]]`,
				`[["tl.store", [640, 3], ["*int32"]], ["tl.debug_barrier", [], []], ` +
					`["nvshmemx_putmem_block", [4096, 8192, 8, 1], ["int64", "int64", "int64", "int32"]], ["nvshmem_quiet", [], []], ` +
					`["nvshmemx_putmem_block", [512, 640, 4, 1], ["int64", "int64", "int64", "int32"]]]`,
				`[]`, // block 1
				`[["nvshmem_int_wait_until", [512, 5, 3], ["int64", "int32", "int32"]]]`,
				// round 1's stamp of rank 0 in its word (slots + (1 % 2) x 2 + 0), put to
				// rank 1, the user's barrier, then the stamps counted: rank 1's is not
				// here (the stand-in has no rank 1)
				`[["tl.store", [1040, 65537], ["*uint64"]], ["tl.debug_barrier", [], []], ` +
					`["nvshmemx_putmem_block", [1040, 1040, 8, 1], ["int64", "int64", "int64", "int32"]], ` +
					`["nvshmemx_barrier_all_block", [], []], ["tl.atomic_add", [2048, 1], ["*uint64"]]]`,
				// the unordered fault (meet 1): no barrier; the drop fault (meet 2): no stamp
				`[["tl.store", [1040, 65537], ["*uint64"]], ["tl.debug_barrier", [], []], ` +
					`["nvshmemx_putmem_block", [1040, 1040, 8, 1], ["int64", "int64", "int64", "int32"]], ["tl.atomic_add", [2048, 1], ["*uint64"]]]`,
				`[["nvshmemx_barrier_all_block", [], []], ["tl.atomic_add", [2048, 2], ["*uint64"]]]`,
			}, []string{"nbi=0,1"}},
		{"seed_put.py", "8,1048576", `[["put_block",0,{` + ptr + `,"nbytes":[8,"i64"],` + rest + `,"peer":[1,"i32"]}],
			["put_block",1,{` + ptr + `,"nbytes":[8,"i64"],` + rest + `,"peer":[1,"i32"]}],
			["put_block",0,{` + ptr + `,"nbytes":[1048576,"i64"],` + rest + `,"peer":[3,"i32"]}],
			["put_block",0,{` + ptr + `,"nbytes":[16,"i64"],` + rest + `,"peer":[1,"i32"]}]]`,
			[]string{
				`[["nvshmemx_putmem_block", [4096, 8192, 8, 1], ["int64", "int64", "int64", "int32"]]]`,
				`[]`, // block 1 of a one-block kernel
				`[["nvshmemx_putmem_block", [4096, 8192, 1048576, 3], ["int64", "int64", "int64", "int32"]]]`,
				`[]`, // run and bench refuse a size it was not built for (Catalog.CheckSizes)
			}, nil},
		{"torch_kernels.py", "8", `[["put_block",0,{` + ptr + `,"nbytes":[1000,"i64"],` + rest + `,"peer":[1,"i32"]}],
			["get_block",0,{` + ptr + `,"nbytes":[64,"i64"],` + rest + `,"peer":[0,"i32"]}],
			["put_signal_block",0,{` + ptr + `,"nbytes":[64,"i64"],` + rest + `,` + sig + `,"peer":[1,"i32"]}],
			["put_signal_block",1,{` + ptr + `,"nbytes":[64,"i64"],` + rest + `,` + sig + `,"peer":[1,"i32"]}],
			["put_signal_block",1,{` + ptr + `,"nbytes":[64,"i64"],` + rest + `,` + sig + `,"peer":[1,"i32"]},5],
			["wait_signal",0,{` + sig + `,"value":[4,"u64"]}]]`,
			[]string{
				`[["nvshmemx_putmem_block", [4096, 8192, 1000, 1], ["int64", "int64", "int64", "int32"]]]`,
				// 8 int64 elements: nelems = nbytes / 8, bytes = nelems x 8
				`[["nvshmemx_getmem_block", [4096, 8192, 64, 0], ["int64", "int64", "int64", "int32"]]]`,
				`[["nvshmemx_putmem_signal_block", [4096, 8192, 64, 512, 1, 10, 1], ["int64", "int64", "int64", "int64", "uint64", "int32", "int32"]]]`,
				// the other blocks add their signal alone: the receiver counts one per block
				`[["nvshmemx_signal_op", [512, 1, 10, 1], ["int64", "uint64", "int32", "int32"]]]`,
				`[]`, // by thread 0 alone
				`[["nvshmem_signal_wait_until", [512, 5, 4], ["int64", "int32", "uint64"]]]`,
			}, nil},
	} {
		file := "../../examples/" + tc.file
		if strings.HasPrefix(tc.file, "internal/") {
			file = "../../" + tc.file
		}
		cmd := exec.Command("python3", append([]string{"testdata/faketriton/entries.py", "../..", sigs, file, tc.sizes}, tc.consts...)...)
		cmd.Env = append(os.Environ(), "PYTHONPATH=testdata/faketriton")
		cmd.Stdin = strings.NewReader(tc.launches)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.file, err, out)
		}
		if got := strings.Split(strings.TrimSpace(string(out)), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: the entries called\n%s\nwant\n%s", tc.file, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

// symmem's copy of torch's module has the names the plan says it has, and the plan's
// entries have the signatures the build script compiles them with.
func TestTorchAPINamesMatch(t *testing.T) {
	needPython(t)
	prog := `import ast, importlib.util, json, sys
tree = ast.parse(open(sys.argv[2] + "/kernels/triton/nvshmem_torch.py").read())
names = set()
for n in tree.body:
    if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_"):
        names.add(n.name)
    if isinstance(n, ast.Assign):
        names.update(t.id for t in n.targets if isinstance(t, ast.Name) and not t.id.startswith("_"))
spec = importlib.util.spec_from_file_location("bk", sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
tp = m.torch_plan
if names != set(tp.API):
    print("nvshmem_torch.py has", sorted(names - set(tp.API)), "beyond torch_plan.API; lacks", sorted(set(tp.API) - names))
tp.use_signatures(m.Signatures.read(sys.argv[3]).kernels)
print(json.dumps({op: [k, list(params)] for op, (k, params) in tp.ENTRIES.items()}))`
	sigs, err := kernelbuild.WriteSignatures(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("python3", "-c", prog, buildScriptPath, "../..", sigs).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var entries map[string][2]any
	if err := json.Unmarshal(out, &entries); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// Every entry is the table's kernel with the table's parameters.
	for op, e := range entries {
		var names []string
		for _, p := range kernels.Signatures()[e[0].(string)] {
			names = append(names, p.Name)
		}
		if e[0].(string) != kernels.OpKernels()[op] || fmt.Sprint(e[1]) != fmt.Sprint(names) {
			t.Errorf("%s: the entry is %v%v, the table's %s%v", op, e[0], e[1], kernels.OpKernels()[op], names)
		}
	}
	if len(entries) == 0 {
		t.Error("no entries")
	}
}

// The whole build of a PyTorch-style file, with a stand-in for Triton's compiler and
// the NVSHMEM wheel (testdata/faketriton): the embedded script plans the file, writes
// its entries, compiles each in the worker processes, writes the sidecars, and leaves
// nothing behind in TMPDIR; what it wrote loads as a user's catalogue (every entry takes
// symmem's parameters), with the sizes a tl.constexpr size serves.
func TestKernelsBuildTorchFile(t *testing.T) {
	needPython(t)
	fake, err := filepath.Abs("testdata/faketriton")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", fake)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	out := filepath.Join(t.TempDir(), "out")
	for _, f := range []struct {
		file  string
		sizes []string
	}{{"seed_put.py", []string{"8", "1M"}}, {"torch_kernels.py", nil}} {
		o := &KernelsBuildOptions{File: "../../examples/" + f.file, Arch: []int{90}, Warps: []int{4, 32}, Out: out, Sizes: f.sizes}
		var stdout, stderr bytes.Buffer
		if err := runKernelsBuild(context.Background(), o, IO{Out: &stdout, Err: &stderr}); err != nil {
			t.Fatalf("%s: %v\n%s%s", f.file, err, stdout.String(), stderr.String())
		}
		if want := "built against symmem's copy of PyTorch's SHMEM modules (no torch here)"; !strings.Contains(stdout.String(), want) {
			t.Errorf("%s: the build does not say whose module it used (%q):\n%s", f.file, want, stdout.String())
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
	c, err := kernels.LoadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range c.Artifacts {
		got[a.Impl+"/"+a.Kernel+"/"+strconv.Itoa(a.NumWarps)] = fmt.Sprint(a.Entry, " ", a.Sizes, " ", strings.SplitN(a.Wraps, ":", 2)[0])
	}
	want := map[string]string{
		"seed-put/put_block/4": "put_block [8 1048576] put_kernel", "seed-put/put_block/32": "put_block [8 1048576] put_kernel",
		"torch-kernels/put_block/4": "put_block [] my_put_kernel", "torch-kernels/put_block/32": "put_block [] my_put_kernel",
		"torch-kernels/get_block/4": "get_block [] my_get_kernel", "torch-kernels/get_block/32": "get_block [] my_get_kernel",
		"torch-kernels/put_signal_block/4": "put_signal_block [] my_putmem_signal_block_kernel", "torch-kernels/put_signal_block/32": "put_signal_block [] my_putmem_signal_block_kernel",
		"torch-kernels/wait_signal/1":    "wait_signal [] my_signal_wait_until_kernel",
		"torch-kernels/put_flag_fence/4": "put_flag_fence [] my_put_with_fence_kernel", "torch-kernels/put_flag_fence/32": "put_flag_fence [] my_put_with_fence_kernel",
		"torch-kernels/barrier_all/1": "barrier_all [] my_barrier_all_kernel",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("artifacts\n%v\nwant\n%v", got, want)
	}
	if err := c.CheckSizes("seed-put", []string{"put_block"}, []int64{8, 1 << 20}); err != nil {
		t.Errorf("the sizes built: %v", err)
	}
	if err := c.CheckSizes("seed-put", []string{"put_block"}, []int64{4096}); err == nil || !strings.Contains(err.Error(), "built for 8,1048576 bytes only, not 4096") {
		t.Errorf("a size not built: %v", err)
	}
}

// pytorchTests holds the kernels of PyTorch's test/distributed/test_nvshmem_triton.py.
const pytorchTests = "testdata/torch/test_nvshmem_triton.py"

// Every kernel of PyTorch's test file is served or listed as not served with the
// reason, by what it calls, with my_get_kernel's nbi built once per --const value.
func TestKernelsBuildCheckPyTorchTests(t *testing.T) {
	needPython(t)
	o := &KernelsBuildOptions{File: pytorchTests, Arch: []int{90}, Warps: DefaultBuildWarps, Out: filepath.Join(t.TempDir(), "out"), Check: true,
		Consts: []string{"nbi=0,1"}, Name: "pt"}
	var stdout bytes.Buffer
	if err := runKernelsBuild(context.Background(), o, IO{Out: &stdout, Err: io.Discard}); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	want := map[string][]string{
		"my_put_kernel":                 {"serves put as pt.put_block: dest=dst (*int8), src=src (*int8), nelems=nbytes, pe=peer;"},
		"my_get_kernel":                 {"serves get as pt[nbi=0].get_block: dest=dst (*int8), src=src (*int8), nelems=nbytes, pe=peer, nbi=0 (--const);", "serves get as pt[nbi=1].get_block:"},
		"my_putmem_signal_block_kernel": {"serves put-signal as pt.put_signal_block: dst=dst (*int8), src=src (*int8), size_bytes=nbytes, signal=sig, sig_val=1, sig_op=SIGNAL_ADD, peer=peer;"},
		"my_signal_wait_until_kernel":   {"serves wait-signal as pt.wait_signal: signal=sig, cmp_op=CMP_GE, cmp_val=value;"},
		"my_signal_op_kernel":           {"serves signal as pt.signal_op: sig_addr=sig (address), signal=value, sig_op=op, peer=peer; thread 0 of block 0 runs it (each signal op lands once), then a fence"},
		"my_wait_until_kernel":          {"serves wait-flag as pt.wait_flag: ivar=flag (*int32), cmp_op=CMP_GE, cmp_val=value (int32); block 0 runs it"},
		"my_fence_kernel":               {"is not served: it calls nvshmem.fence alone: it orders nothing whose data symmem could check"},
		"my_put_with_fence_kernel": {"serves put-flag as pt.put_flag_fence: dst1=dst (*int8), part 1 of 2, src1=src (*int8), part 1 of 2, dst2=dst (*int8), part 2 of 2, src2=src (*int8), part 2 of 2, " +
			"flag_dst=flag (*int32), flag_src=flag_src (*int32), nelems=nbytes / 2, peer=peer; block 0 runs it, value stored in flag_src first; each message a whole number of 2 bytes"},
		"my_put_with_quiet_kernel": {"serves put-flag:quiet as pt.put_flag_quiet: dst=dst (*int8), src=src (*int8), flag_dst=flag (*int32), flag_src=flag_src (*int32), nelems=nbytes, peer=peer; block 0 runs it, value stored in flag_src first"},
		"my_barrier_test_kernel":   {"is not served: it carries a test's own logic around nvshmem.barrier_all"},
		"my_barrier_all_kernel":    {"serves barrier as pt.barrier_all: one block runs it, launched cooperatively, between this rank's stamp put to every rank and the count of the stamps it sees"},
		"my_sync_test_kernel":      {"is not served: it carries a test's own logic around nvshmem.sync_all"},
		"my_alltoall_kernel":       {"serves all-to-all as pt.all_to_all: team_handle=team world (0), dst=recv (*int8), src=send (*int8), nelems_per_pe=nelem; one block runs it on team world, launched cooperatively"},
		"my_broadcast_kernel":      {"serves broadcast as pt.broadcast: team_handle=team world (0), dst=recv (*int8), src=send (*int8), nelems=nelem, pe_root=root;"},
		"my_reduce_kernel": {"serves all-reduce as pt.all_reduce_bf16: team_handle=team world (0), dest_tensor=recv (*bf16), source_tensor=send (*bf16), nreduce=nelem, operation='sum' (--redop sum)",
			"serves all-reduce:float32 as pt.all_reduce_f32: team_handle=team world (0), dest_tensor=recv (*fp32)",
			"serves all-reduce:max as pt.all_reduce_bf16_max: team_handle=team world (0), dest_tensor=recv (*bf16), source_tensor=send (*bf16), nreduce=nelem, operation='max' (--redop max)",
			"serves all-reduce:float32:min as pt.all_reduce_f32_min:", "serves all-reduce:prod as pt.all_reduce_bf16_prod:", "serves all-reduce:float32:prod as pt.all_reduce_f32_prod:"},
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	for fn, ws := range want {
		for _, w := range ws {
			found := false
			for _, l := range lines {
				// "FILE: my_put_kernel(...) serves" or "FILE: my_fence_kernel is not served".
				_, rest, _ := strings.Cut(l, ": ")
				if (strings.HasPrefix(rest, fn+"(") || strings.HasPrefix(rest, fn+" ")) && strings.Contains(l, w) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: --check lacks %q in\n%s", fn, w, stdout.String())
			}
		}
	}
	if len(lines) != 23 { // 15 kernels, get twice, reduce for both element types and 4 operators
		t.Errorf("%d lines, want 23 (one a kernel, one more for get's second variant, 7 more for reduce's element types and operators):\n%s", len(lines), stdout.String())
	}
	// Without --const, my_get_kernel is listed with how to build it.
	o.Consts = nil
	stdout.Reset()
	if err := runKernelsBuild(context.Background(), o, IO{Out: &stdout, Err: io.Discard}); err != nil ||
		!strings.Contains(stdout.String(), "my_get_kernel is not served: my_get_kernel (for get): parameter 'nbi' means nothing symmem knows: set it with --const nbi=VALUE[,VALUE...]") {
		t.Errorf("without --const: %v\n%s", err, stdout.String())
	}
}

// Kernels are matched by what they call and how they pass their parameters, not by
// their names: a file of names symmem has never seen is served as PyTorch's test file is.
func TestKernelsBuildMatchesByUse(t *testing.T) {
	needPython(t)
	head := "import triton\nimport triton.language as tl\nimport torch.distributed._symmetric_memory._nvshmem_triton as shm\n\n"
	src := head + "@triton.jit\ndef a(x, y, k, who, W: tl.constexpr):\n    shm.put(x, y, k, who)\n\n" +
		"@triton.jit\ndef _pull(p, q, m, r):\n    shm.get(p, q, m, r)\n\n@triton.jit\ndef b(u, v, w, z):\n    _pull(u, v, w, z)\n\n" +
		"@triton.jit\ndef c(grp, o, i, cnt, how: tl.constexpr):\n    shm.reduce(grp, o, i, cnt, how)\n\n" +
		"@triton.jit\ndef d(g, o, i, cnt, top):\n    shm.broadcast(g, o, i, cnt, top)\n\n" +
		"@triton.jit\ndef e(o, i, fo, fi, cnt, who):\n    shm.put(o, i, cnt, who)\n    shm.quiet()\n    shm.put(fo, fi, 1, who)\n" +
		"@triton.jit\ndef f(w, how, until):\n    shm.wait_until(w, how, until)\n\n" +
		"@triton.jit\ndef g(word, v, o, who):\n    shm.signal_op(word, v, o, who)\n\n" +
		"@triton.jit\ndef h():\n    shm.barrier_all()\n"
	out, err := checkFile(t, src, "")
	for _, w := range []string{
		"a(x, y, k, who, W: tl.constexpr) serves put as mine.put_block: x=dst (*int8), y=src (*int8), k=nbytes, who=peer, W=0 (the body never reads it: any value);",
		"b(u, v, w, z) serves get as mine.get_block: u=dst (*int8), v=src (*int8), w=nbytes, z=peer;",
		"c(grp, o, i, cnt, how: tl.constexpr) serves all-reduce as mine.all_reduce_bf16: grp=team world (0), o=recv (*bf16), i=send (*bf16), cnt=nelem, how='sum' (--redop sum)",
		"c(grp, o, i, cnt, how: tl.constexpr) serves all-reduce:float32:max as mine.all_reduce_f32_max: grp=team world (0), o=recv (*fp32), i=send (*fp32), cnt=nelem, how='max' (--redop max)",
		"d(g, o, i, cnt, top) serves broadcast as mine.broadcast: g=team world (0), o=recv (*int8), i=send (*int8), cnt=nelem, top=root;",
		"e(o, i, fo, fi, cnt, who) serves put-flag:quiet as mine.put_flag_quiet: o=dst (*int8), i=src (*int8), fo=flag (*int32), fi=flag_src (*int32), cnt=nbytes, who=peer;",
		"f(w, how, until) serves wait-flag as mine.wait_flag: w=flag (*int32), how=CMP_GE, until=value (int32);",
		"g(word, v, o, who) serves signal as mine.signal_op: word=sig (address), v=value, o=op, who=peer;",
		"h() serves barrier as mine.barrier_all: one block runs it, launched cooperatively,",
	} {
		if err != nil || !strings.Contains(out, w) {
			t.Errorf("%v: --check lacks %q in\n%s", err, w, out)
		}
	}
}

// A reduce whose operator is a literal, or a value in the declaration file, serves
// that operator alone; one NVSHMEM's reduce has but symmem's --redop does not is not
// served, saying why.
func TestKernelsBuildReduceOperators(t *testing.T) {
	needPython(t)
	head := "import triton\nimport triton.language as tl\nimport torch.distributed._symmetric_memory._nvshmem_triton as shm\n\n"
	for _, tc := range []struct {
		src, decl string
		want      []string
		lines     int
	}{
		{"@triton.jit\ndef m(g, o, i, cnt):\n    shm.reduce(g, o, i, cnt, \"max\")\n", "",
			[]string{"m(g, o, i, cnt) serves all-reduce:max as mine.all_reduce_bf16_max:", "m(g, o, i, cnt) serves all-reduce:float32:max as mine.all_reduce_f32_max:"}, 2},
		{"@triton.jit\ndef m(g, o, i, cnt, how: tl.constexpr):\n    shm.reduce(g, o, i, cnt, how)\n", `{"m": {"params": {"how": "min"}}}`,
			[]string{"serves all-reduce:min as mine.all_reduce_bf16_min: g=team world (0), o=recv (*bf16), i=send (*bf16), cnt=nelem, how='min';"}, 2},
		{"@triton.jit\ndef m(g, o, i, cnt):\n    shm.reduce(g, o, i, cnt, \"xor\")\n\n@triton.jit\ndef p(d, s, n, pe):\n    shm.put(d, s, n, pe)\n", "",
			[]string{"m is not served: it reduces with 'xor', which is no operator of NVSHMEM's reduce that symmem has (sum, max, min, prod)"}, 2},
	} {
		out, err := checkFile(t, head+tc.src, tc.decl)
		for _, w := range tc.want {
			if err != nil || !strings.Contains(out, w) {
				t.Errorf("%v: --check lacks %q in\n%s", err, w, out)
			}
		}
		if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != tc.lines {
			t.Errorf("%d lines, want %d:\n%s", n, tc.lines, out)
		}
	}
}

// --const is checked: a name no kernel reads, a parameter symmem gives a meaning, a
// value that cannot name a variant, and a file of symmem's signatures are refused.
func TestKernelsBuildConstRefusals(t *testing.T) {
	needPython(t)
	head := "import triton\nimport triton.language as tl\nimport torch.distributed._symmetric_memory._nvshmem_triton as nvshmem\n\n"
	src := head + "@triton.jit\ndef k(dest, src, nelems, pe, nbi: tl.constexpr):\n    if nbi:\n        nvshmem.get(dest, src, nelems, pe)\n"
	for _, tc := range []struct {
		consts []string
		want   string
	}{
		{[]string{"nbi=0,1", "depth=2"}, "--const depth: no kernel symmem builds from it reads a parameter depth"},
		{[]string{"nbi=1", "pe=1"}, "k (for get): --const pe: symmem gives parameter 'pe' its meaning (peer): drop --const pe"},
		{[]string{"nbi=a b"}, "--const nbi=a b: value 'a b': use letters, digits and _.+- (32 at most)"},
		{[]string{"nbi"}, `--const "nbi": want NAME=VALUE[,VALUE...], as --const nbi=0,1`},
	} {
		_, err := checkFile(t, src, "", func(o *KernelsBuildOptions) { o.Consts = tc.consts })
		if symmem.ExitCode(err) != exitcode.Usage || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--const %v: got %v (exit %d), want %q", tc.consts, err, symmem.ExitCode(err), tc.want)
		}
	}
	_, err := checkFile(t, "import triton\nSYMMEM_KERNELS = {\"put\": \"p\"}\n@triton.jit\ndef p(dst, src, nbytes, chunk, peer):\n    pass\n", "",
		func(o *KernelsBuildOptions) { o.Consts = []string{"x=1"} })
	if err == nil || !strings.Contains(err.Error(), "--const sets a tl.constexpr of a kernel written for PyTorch's NVSHMEM module") {
		t.Errorf("--const on a file of symmem's signatures: %v", err)
	}
}

// PyTorch's test file builds whole with a stand-in for Triton (testdata/faketriton):
// each --const value a variant implementation, the collectives under symmem's
// signatures, and the directory loads as implementations run and bench take.
func TestKernelsBuildPyTorchTests(t *testing.T) {
	needPython(t)
	fake, err := filepath.Abs("testdata/faketriton")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", fake)
	t.Setenv("TMPDIR", t.TempDir())
	out := filepath.Join(t.TempDir(), "out")
	o := &KernelsBuildOptions{File: pytorchTests, Arch: []int{90}, Warps: []int{4}, Out: out, Name: "pt", Consts: []string{"nbi=0,1"}}
	var stdout, stderr bytes.Buffer
	if err := runKernelsBuild(context.Background(), o, IO{Out: &stdout, Err: &stderr}); err != nil {
		t.Fatalf("%v\n%s%s", err, stdout.String(), stderr.String())
	}
	c, err := kernels.LoadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range c.Artifacts {
		got[a.Impl+"/"+a.Kernel] = a.Entry + " " + strings.SplitN(a.Wraps, ":", 2)[0]
	}
	want := map[string]string{
		"pt/put_block": "put_block my_put_kernel", "pt[nbi=0]/get_block": "get_block_nbi_0 my_get_kernel", "pt[nbi=1]/get_block": "get_block_nbi_1 my_get_kernel",
		"pt/put_signal_block": "put_signal_block my_putmem_signal_block_kernel", "pt/wait_signal": "wait_signal my_signal_wait_until_kernel",
		"pt/signal_op":      "signal_op my_signal_op_kernel",
		"pt/put_flag_fence": "put_flag_fence my_put_with_fence_kernel", "pt/put_flag_quiet": "put_flag_quiet my_put_with_quiet_kernel",
		"pt/wait_flag": "wait_flag my_wait_until_kernel", "pt/barrier_all": "barrier_all my_barrier_all_kernel",
		"pt/all_to_all": "all_to_all my_alltoall_kernel", "pt/broadcast": "broadcast my_broadcast_kernel",
	}
	for _, red := range []string{"", "_max", "_min", "_prod"} {
		for _, dt := range []string{"bf16", "f32"} {
			k := "all_reduce_" + dt + red
			want["pt/"+k] = k + " my_reduce_kernel"
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("artifacts\n%v\nwant\n%v", got, want)
	}
	reg, _, err := backend.Builtin(backends.All()...).WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range [][2]string{{"pt[nbi=1]", "get"}, {"pt[nbi=0]", "get"}, {"pt", "all-to-all"}, {"pt", "signal"}} {
		im, ok := reg.ByName(want[0])
		if !ok || len(im.Kernels[ops.Op(want[1])]) == 0 {
			t.Errorf("implementation %s: %v, serves %v, want %s", want[0], ok, im.Kernels, want[1])
		}
	}
	im, _ := reg.ByName("pt")
	if strings.Join(im.RedOps, ",") != "sum,prod,max,min" {
		t.Errorf("pt reduces with %v, want sum, prod, max, min", im.RedOps)
	}
	if got := strings.Join(im.Kernels[ops.PutFlag], ","); got != "put_flag_fence,put_flag_quiet,wait_flag" || strings.Join(im.VariantsOf(ops.PutFlag, ""), ",") != "fence,quiet" {
		t.Errorf("pt serves put-flag with %s, variants %v", got, im.Variants)
	}
	if got := strings.Join(im.Kernels[ops.Barrier], ","); got != "barrier_all" || strings.Join(im.VariantsOf(ops.Barrier, ""), ",") != "barrier-all" {
		t.Errorf("pt serves barrier with %s, variants %v", got, im.Variants)
	}
	// Every operation of the file's kernels: 12 of its 15 kernels.
	if got := ops.Names(im.Ops()); got != "put, put-signal, all-reduce, broadcast, all-to-all, signal, put-flag, barrier" {
		t.Errorf("pt serves %s", got)
	}
	// The fence kernel's two puts share one count: a message is whole pairs of bytes.
	// NVSHMEM's collectives and the barrier are launched as PyTorch launches them: one
	// block, cooperatively.
	for _, a := range c.Artifacts {
		if want := map[string]int64{"put_flag_fence": 2}[a.Kernel]; a.Unit != want {
			t.Errorf("%s: unit %d, want %d", a.Name(), a.Unit, want)
		}
		coop := strings.HasPrefix(a.Kernel, "all_") || a.Kernel == "broadcast" || a.Kernel == "barrier_all"
		if a.Cooperative != coop || a.Grid != map[bool]int{true: 1}[coop] {
			t.Errorf("%s: cooperative %v, grid %d", a.Name(), a.Cooperative, a.Grid)
		}
	}
	if err := c.CheckSizes("pt", im.Kernels[ops.PutFlag], []int64{8, 7}); err == nil || !strings.Contains(err.Error(), "pt's put_flag_fence moves whole units of 2 bytes") {
		t.Errorf("a size of 7 bytes: %v", err)
	}
	// A rebuild replaces the earlier build's variants too.
	o.Consts = []string{"nbi=1"}
	if err := runKernelsBuild(context.Background(), o, IO{Out: io.Discard, Err: io.Discard}); err != nil {
		t.Fatal(err)
	}
	if c, err = kernels.LoadDir(out); err != nil || slices.Contains(c.Impls(), "pt[nbi=0]") || !slices.Contains(c.Impls(), "pt[nbi=1]") {
		t.Errorf("rebuilt with --const nbi=1: %v, implementations %v", err, c.Impls())
	}
}
