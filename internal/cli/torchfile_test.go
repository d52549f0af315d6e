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
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/kernelbuild"
	"github.com/symmem/symmem/pkg/kernels"
)

// shmemTests is PyTorch's newest Triton SHMEM test file, written against the
// backend-generic _shmem_triton module, whole: its torch imports, its gate, its 27
// kernels and a test class.
const shmemTests = "testdata/torch/test_shmem_triton.py"

// checkPath runs kernels build --check on path, returning what it printed and its error.
func checkPath(t *testing.T, path string, opts ...func(*KernelsBuildOptions)) (string, error) {
	t.Helper()
	o := &KernelsBuildOptions{File: path, Arch: []int{90}, Warps: DefaultBuildWarps, Out: filepath.Join(t.TempDir(), "out"), Check: true, Script: buildScriptPath}
	for _, f := range opts {
		f(o)
	}
	var out bytes.Buffer
	err := runKernelsBuild(context.Background(), o, IO{Out: &out, Err: io.Discard})
	return out.String(), err
}

// withName and withConsts set --name and --const.
func withName(n string) func(*KernelsBuildOptions) {
	return func(o *KernelsBuildOptions) { o.Name = n }
}
func withConsts(c ...string) func(*KernelsBuildOptions) {
	return func(o *KernelsBuildOptions) { o.Consts = c }
}

// Every kernel of the file is served by one of symmem's operations or listed with the
// reason, by what it calls through whatever name the generic module's backend has:
// put then quiet and the multi-block puts in place, to one peer and to every peer, are
// puts (each a variant of the implementation of its own, IMPL[fn=FUNCTION]); the fused
// matmuls serve all-gather-matmul, the fused get-add get-add (a kernel per element
// type, its block symmem's or --const's); the tritonblas kernels, a fence or quiet
// alone and the tests' own logic are not.
func TestKernelsBuildCheckShmemTests(t *testing.T) {
	needPython(t)
	out, err := checkPath(t, shmemTests, withName("st"), withConsts("nbi=0,1"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[string][]string{
		"my_put_kernel":                 {"serves put as st.put_block: dest=dst (*int8), src=src (*int8), nelems=nbytes, pe=peer;"},
		"my_get_kernel":                 {"serves get as st[nbi=0].get_block:", "serves get as st[nbi=1].get_block:"},
		"my_putmem_signal_block_kernel": {"serves put-signal as st.put_signal_block:"},
		"my_signal_wait_until_kernel":   {"serves wait-signal as st.wait_signal:"},
		"my_signal_op_kernel":           {"serves signal as st.signal_op:"},
		"my_wait_until_kernel":          {"serves wait-flag as st.wait_flag:"},
		"my_fence_kernel":               {"is not served: it calls nvshmem.fence alone"},
		"my_put_with_fence_kernel":      {"serves put-flag as st.put_flag_fence:"},
		"my_put_with_quiet_kernel":      {"serves put-flag:quiet as st.put_flag_quiet:"},
		"my_barrier_test_kernel":        {"is not served: it carries a test's own logic around nvshmem.barrier_all"},
		"my_sync_test_kernel":           {"is not served: it carries a test's own logic around nvshmem.sync_all"},
		"my_barrier_all_kernel":         {"serves barrier as st.barrier_all:"},
		"my_alltoall_kernel":            {"serves all-to-all as st.all_to_all:"},
		"my_broadcast_kernel":           {"serves broadcast as st.broadcast:"},
		"my_reduce_kernel":              {"serves all-reduce as st.all_reduce_bf16:", "serves all-reduce:float32:prod as st.all_reduce_f32_prod:"},
		"my_fused_get_add_kernel":       {"serves get-add as st.get_add_f32: out=dst (*fp32), local_inp=local (*fp32), remote_symm_src=src (*fp32), tmp_remote=tmp (*fp32), nelems=nelem, peer=peer, block_size=1024 (the most elements one program adds; --const block_size=N for another, a power of two); block 0 runs it (it reads no program id)", "serves get-add:bf16 as st.get_add_bf16: out=dst (*bf16),", "serves get-add:int64 as st.get_add_i64: out=dst (*int64),"},
		"my_put_quiet_kernel":           {"serves put as st[fn=my_put_quiet_kernel].put_block: dest=dst (*int8), src=src (*int8), nelems=nbytes, pe=peer; block 0 runs it"},
		"my_parallel_put_quiet_kernel": {"serves put as st[fn=my_parallel_put_quiet_kernel].put_block: src_ptr=dst (*int8), in place: this rank's src is put into its own dst first, " +
			"total_elems=the end of the block's part of the message, in elements, peer=peer, chunk_per_wg=131072 (the most one call puts, elements; --const chunk_per_wg=N for another); " +
			"every block runs it on its chunk of the message"},
		"my_parallel_put_allpeers_quiet_kernel": {"serves put as st[fn=my_parallel_put_allpeers_quiet_kernel].put_block: src_ptr=dst (*int8), in place: this rank's src is put into its own dst first, " +
			"total_elems=the end of the block's part of the message, in elements, rank=this rank (nvshmem my_pe), chunk_per_wg=131072 (the most one call puts, elements; --const chunk_per_wg=N for another), " +
			"world_size=the job's ranks (tl.constexpr: 2 to 8 ranks; --const world_size=N for a job of N); every block runs it on its chunk of the message", "each call putting to every other rank; one sender: run put with --pattern one-to-all"},
		"my_parallel_put_no_quiet_kernel": {"serves put as st[fn=my_parallel_put_no_quiet_kernel].put_block: src_ptr=dst (*int8), in place"},
		"my_parallel_put_striped_peers_quiet_kernel": {"serves put as st[fn=my_parallel_put_striped_peers_quiet_kernel].put_block: src_ptr=dst (*int8), in place", "rank=this rank (nvshmem my_pe), chunk_per_wg_per_peer=131072 (the most one call puts",
			"world_size=the job's ranks (tl.constexpr: 2 to 8 ranks; --const world_size=N for a job of N), wgs_per_peer=0 (the body never reads it: any value); a block per chunk of the message and peer (ceil(nbytes / chunk) x (ranks - 1) blocks: block b takes chunk b // (ranks - 1)",
			"one sender: run put with --pattern one-to-all"},
		"my_quiet_kernel": {"is not served: it calls nvshmem.quiet alone"},
		"my_fused_matmul_allgather_put_kernel": {"serves all-gather-matmul:float16 as st.all_gather_matmul_f16: a_ptr=A (this rank's m_local rows, *fp16), b_ptr=B (*fp16), c_ptr=C (every rank's rows, *fp16), " +
			"m_local=M / ranks, n=N, k=K, stride_am=K, stride_ak=1, stride_bk=N, stride_bn=1, stride_cm=N, stride_cn=1, rank=this rank, peer=the rank its rows go to, " +
			"block_m=64 (--const to change), block_n=64 (--const to change), block_k=32 (--const to change); a grid of cdiv(m_local, 64) x cdiv(n, 64) programs, launched once per peer"},
		"my_fused_matmul_allgather_put_persistent_kernel": {"serves all-gather-matmul:float16 as st[fn=my_fused_matmul_allgather_put_persistent_kernel].all_gather_matmul_f16:",
			"num_pid_n=cdiv(n, 64), total_tiles=cdiv(m_local, 64) x cdiv(n, 64)", "the cdiv(m_local, 64) programs of column 0 of symmem's grid run it, each looping over the tiles by tl.num_programs(0)"},
		"my_fused_matmul_allgather_put_tritonblas_kernel":  {"is not served: it needs tritonblas (make_tensor_view from tritonblas.kernels.stages), which is not installed for this Python"},
		"my_tritonblas_gemm_only_kernel":                   {"is not served: it needs tritonblas"},
		"my_fused_matmul_allgather_bulk_tritonblas_kernel": {"is not served: it needs tritonblas"},
	}
	if len(want) != 27 {
		t.Fatalf("the table has %d kernels, the file 27", len(want))
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		_, rest, _ := strings.Cut(l, ": ")
		fn, _, _ := strings.Cut(strings.Fields(rest)[0], "(")
		seen[fn] = true
		if _, ok := want[fn]; !ok {
			t.Errorf("a line for %s, no kernel of the file: %s", fn, l)
		}
	}
	for fn, ws := range want {
		if !seen[fn] {
			t.Errorf("%s: no line", fn)
		}
		for _, w := range ws {
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, ": "+fn) && strings.Contains(l, w) }) {
				t.Errorf("%s: --check lacks %q", fn, w)
			}
		}
	}
	// 20 kernels served (get twice, reduce 8 times, get-add 6 times), 7 not.
	if len(lines) != 40 {
		t.Errorf("%d lines, want 40:\n%s", len(lines), out)
	}
	// --const gives the chunk a put in place puts other values; one that is no count is
	// refused.
	out, err = checkPath(t, shmemTests, withName("st"), withConsts("nbi=0", "chunk_per_wg=4096"))
	if w := "serves put as st[fn=my_parallel_put_quiet_kernel][chunk_per_wg=4096].put_block: src_ptr=dst (*int8), in place"; err != nil || !strings.Contains(out, w) || !strings.Contains(out, "chunk_per_wg=4096 (the most one call puts") {
		t.Errorf("--const chunk_per_wg=4096: %v, want %q in\n%s", err, w, out)
	}
	if _, err = checkPath(t, shmemTests, withConsts("nbi=0", "chunk_per_wg=big")); err == nil || symmem.ExitCode(err) != exitcode.Usage ||
		!strings.Contains(err.Error(), "--const chunk_per_wg='big': parameter 'chunk_per_wg' is the chunk a program puts: give a whole number of elements") {
		t.Errorf("--const chunk_per_wg=big: %v", err)
	}
	// --const gives get-add's block other sizes, a variant each; one that is no power
	// of two (tl.arange's size) is refused.
	out, err = checkPath(t, shmemTests, withName("st"), withConsts("nbi=0", "block_size=1024,4096"))
	for _, w := range []string{"serves get-add as st[block_size=1024].get_add_f32:", "serves get-add:bf16 as st[block_size=4096].get_add_bf16:",
		"block_size=4096 (the most elements one program adds"} {
		if err != nil || !strings.Contains(out, w) {
			t.Errorf("--const block_size=1024,4096: %v, want %q in\n%s", err, w, out)
		}
	}
	for _, v := range []string{"1000", "0", "2097152", "big"} {
		_, err = checkPath(t, shmemTests, withConsts("nbi=0", "block_size="+v))
		if err == nil || symmem.ExitCode(err) != exitcode.Usage || !strings.Contains(err.Error(), "parameter 'block_size' is the most elements one program adds (the size of its tl.arange): give a power of two, 1 to 1048576") {
			t.Errorf("--const block_size=%s: %v", v, err)
		}
	}
	// --const builds the puts to every peer for other job sizes, a variant each; one that
	// is no job's size is refused, and the rank is symmem's to give.
	out, err = checkPath(t, shmemTests, withName("st"), withConsts("nbi=0", "world_size=3,16"))
	for _, w := range []string{"serves put as st[fn=my_parallel_put_allpeers_quiet_kernel][world_size=3].put_block:", "serves put as st[fn=my_parallel_put_striped_peers_quiet_kernel][world_size=16].put_block:",
		"world_size=the job's ranks (tl.constexpr: ranks 16)"} {
		if err != nil || !strings.Contains(out, w) {
			t.Errorf("--const world_size=3,16: %v, want %q in\n%s", err, w, out)
		}
	}
	for c, w := range map[string]string{
		"world_size=1":    "--const world_size=1: parameter 'world_size' is the job's size: give a number of ranks, 2 to 1024",
		"world_size=many": "--const world_size='many': parameter 'world_size' is the job's size",
		"rank=0":          "--const rank: symmem gives parameter 'rank' its meaning (me): drop --const rank",
	} {
		if _, err = checkPath(t, shmemTests, withConsts("nbi=0", c)); err == nil || symmem.ExitCode(err) != exitcode.Usage || !strings.Contains(err.Error(), w) {
			t.Errorf("--const %s: %v, want %q", c, err, w)
		}
	}
}

// A put in place to peers the kernel computes is served where they read as every rank
// but its own: from one parameter, the job's size (a tl.constexpr, a copy per size;
// or taken at run time from nvshmem n_pes), and compared with one runtime parameter,
// this rank. Otherwise it is refused, saying which.
func TestKernelsBuildPutInPlaceToEveryPeer(t *testing.T) {
	needPython(t)
	head := "import triton\nimport triton.language as tl\nimport torch.distributed._symmetric_memory._nvshmem_triton as nvshmem\n\n@triton.jit\n"
	body := func(sig, loop, cond string) string {
		return "def k(buf, total, " + sig + "):\n    start = tl.program_id(0) * chunk\n    if start < total:\n" +
			"        count = tl.minimum(chunk, total - start)\n        for p in " + loop + ":\n            if " + cond + ":\n" +
			"                nvshmem.put(buf + start, buf + start, count, p)\n    nvshmem.quiet()\n"
	}
	for _, tc := range []struct{ name, src, want string }{
		{"its world size at run time", body("me, chunk: tl.constexpr, world", "range(world)", "p != me"),
			"serves put as mine.put_block: buf=dst (*int8), in place: this rank's src is put into its own dst first, total=the end of the block's part of the message, in elements, me=this rank (nvshmem my_pe), chunk=131072 (the most one call puts, elements; --const chunk=N for another), world=the job's ranks (nvshmem n_pes); every block runs it"},
		{"peers from two parameters", body("me, chunk: tl.constexpr, a: tl.constexpr, b: tl.constexpr", "tl.static_range(0, a + b)", "p != me"),
			"k: it puts in place, but the peers it computes do not come from one tl.constexpr (the job's size, as world_size)"},
		{"its own rank not skipped", body("me, chunk: tl.constexpr, world: tl.constexpr", "tl.static_range(0, world)", "count > 0"),
			"k: it puts in place, but the peers it computes are not compared with one parameter (this rank, as rank)"},
		{"its rank a tl.constexpr", body("me: tl.constexpr, chunk: tl.constexpr, world: tl.constexpr", "tl.static_range(0, world)", "p != me"),
			"k (for put): parameter 'me' is a tl.constexpr, but symmem passes this rank (me) at run time: drop tl.constexpr"},
	} {
		out, err := checkFile(t, head+tc.src, "")
		if err != nil && !strings.Contains(err.Error(), tc.want) || err == nil && !strings.Contains(out, tc.want) {
			t.Errorf("%s: %v, want %q in\n%s", tc.name, err, tc.want, out)
		}
	}
	// Some puts to a peer parameter, others to peers it computes.
	src := "def k(buf, total, me, peer, chunk: tl.constexpr, world: tl.constexpr):\n    start = tl.program_id(0) * chunk\n" +
		"    nvshmem.put(buf + start, buf + start, chunk, peer)\n    for p in tl.static_range(0, world):\n        if p != me:\n" +
		"            nvshmem.put(buf + start, buf + start, chunk, p)\n"
	if _, err := checkFile(t, head+src, ""); err == nil || !strings.Contains(err.Error(), "it puts in place, but some of its puts in place go to a peer parameter, others to peers it computes") {
		t.Errorf("mixed peers: %v", err)
	}
}

// Acceptance uses copies of the file under other names and aliases: the kernels are found
// by what the names resolve to, so every spelling of the same imports serves the same
// kernels in the same way.
func TestKernelsBuildShmemAliases(t *testing.T) {
	needPython(t)
	orig, err := os.ReadFile(shmemTests)
	if err != nil {
		t.Fatal(err)
	}
	const (
		imp     = "import torch.distributed._symmetric_memory._shmem_triton as shmem_triton\n"
		backend = "shmem_backend = shmem_triton.get_shmem_backend_module()\n"
		decor   = "requires_shmem = shmem_triton.requires_shmem\n"
	)
	for _, s := range []string{imp, backend, decor, "from torch._inductor.runtime.triton_compat import triton\n", "import triton.language as tl\n"} {
		if !bytes.Contains(orig, []byte(s)) {
			t.Fatalf("%s lacks %q", shmemTests, s)
		}
	}
	// normalised is what --check printed, without the file's path.
	normalised := func(out string) []string {
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			_, rest, _ := strings.Cut(l, ": ")
			lines = append(lines, rest)
		}
		sort.Strings(lines)
		return lines
	}
	base, err := checkPath(t, shmemTests, withName("st"), withConsts("nbi=0,1"))
	if err != nil {
		t.Fatal(err)
	}
	want := normalised(base)
	for _, tc := range []struct {
		name string
		edit func(string) string
	}{
		{"the generic module from-imported under another alias", func(s string) string {
			s = strings.Replace(s, imp, "from torch.distributed._symmetric_memory import _shmem_triton as gen\n", 1)
			return strings.ReplaceAll(s, "shmem_triton.", "gen.")
		}},
		{"its two names imported, renamed", func(s string) string {
			s = strings.Replace(s, imp, "from torch.distributed._symmetric_memory._shmem_triton import get_shmem_backend_module as backend_of, requires_shmem as needs_shmem\n", 1)
			s = strings.Replace(s, backend, "shmem_backend = backend_of()\n", 1)
			return strings.Replace(s, decor, "requires_shmem = needs_shmem\n", 1)
		}},
		{"the backend module renamed", func(s string) string { return regexp.MustCompile(`\bshmem_backend\b`).ReplaceAllString(s, "sb") }},
		{"the NVSHMEM module itself", func(s string) string {
			s = strings.Replace(s, imp, "from torch.distributed._symmetric_memory import _nvshmem_triton as nvs\n", 1)
			s = strings.Replace(s, backend, "shmem_backend = nvs\n", 1)
			return strings.Replace(s, decor, "requires_shmem = nvs.requires_nvshmem\n", 1)
		}},
		{"reached through torch", func(s string) string {
			s = strings.Replace(s, imp, "", 1)
			s = strings.Replace(s, backend, "shmem_backend = torch.distributed._symmetric_memory._shmem_triton.get_shmem_backend_module()\n", 1)
			return strings.Replace(s, decor, "requires_shmem = torch.distributed._symmetric_memory._shmem_triton.requires_shmem\n", 1)
		}},
		{"through symm_mem, the decorator written out", func(s string) string {
			s = strings.Replace(s, imp, "", 1)
			s = strings.Replace(s, backend, "_gen = symm_mem._shmem_triton\nshmem_backend = _gen.get_shmem_backend_module()\n", 1)
			return strings.ReplaceAll(s, "@requires_shmem\n", "@symm_mem._shmem_triton.requires_shmem\n")
		}},
		{"Triton imported plainly, its language renamed", func(s string) string {
			s = strings.Replace(s, "from torch._inductor.runtime.triton_compat import triton\n", "import triton\n", 1)
			s = strings.Replace(s, "import triton.language as tl\n", "import triton.language as language\n", 1)
			return strings.ReplaceAll(s, "tl.", "language.")
		}},
	} {
		file := filepath.Join(t.TempDir(), "kernels_of_mine.py")
		if err := os.WriteFile(file, []byte(tc.edit(string(orig))), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := checkPath(t, file, withName("st"), withConsts("nbi=0,1"))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := normalised(out)
		for i := range got {
			// The reasons quote the source: compare with the renaming undone.
			got[i] = strings.NewReplacer("language.", "tl.", "sb.", "shmem_backend.").Replace(got[i])
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: --check printed\n%s\nwant (as for %s)\n%s", tc.name, strings.Join(got, "\n"), shmemTests, strings.Join(want, "\n"))
		}
	}
	// Another file name is another implementation name, nothing else.
	file := filepath.Join(t.TempDir(), "shmem_kernels_copy.py")
	if err := os.WriteFile(file, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := checkPath(t, file, withConsts("nbi=0,1"))
	if err != nil || !strings.Contains(out, "my_parallel_put_quiet_kernel(src_ptr, total_elems, peer, chunk_per_wg: tl.constexpr) serves put as shmem-kernels-copy[fn=my_parallel_put_quiet_kernel].put_block") ||
		len(strings.Split(strings.TrimSpace(out), "\n")) != len(want) {
		t.Errorf("renamed file: %v\n%s", err, out)
	}
}

// What only rocSHMEM has is refused, saying so: its module, its decorator (also through
// the generic module's backend), its work-group bindings.
func TestKernelsBuildRefusesRocSHMEM(t *testing.T) {
	needPython(t)
	head := "import triton\nimport torch.distributed._symmetric_memory._rocshmem_triton as roc\n" +
		"import torch.distributed._symmetric_memory._shmem_triton as gen\nbe = gen.get_shmem_backend_module()\n\n"
	for _, tc := range []struct{ src, want string }{
		{"@triton.jit\ndef k(dest, src, nelems, pe):\n    roc.put(dest, src, nelems, pe)\n",
			"k: it calls put, which only rocSHMEM's module (_rocshmem_triton, AMD GPUs') has: symmem runs NVSHMEM"},
		{"@be.requires_rocshmem\n@triton.jit\ndef k(dest, src, nelems, pe):\n    be.put(dest, src, nelems, pe)\n",
			"k: it is decorated with be.requires_rocshmem, rocSHMEM's (AMD GPUs'): symmem runs NVSHMEM"},
		{"@triton.jit\ndef k(dest, src, nelems, pe):\n    be._putmem_wg(dest, src, nelems, pe)\n",
			"k: it calls _putmem_wg, which only rocSHMEM's module (_rocshmem_triton, AMD GPUs') has"},
	} {
		_, err := checkFile(t, head+tc.src, "")
		if symmem.ExitCode(err) != exitcode.Usage || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	// Beside a kernel symmem serves, it is listed with the reason.
	out, err := checkFile(t, head+"@triton.jit\ndef k(dest, src, nelems, pe):\n    roc.put(dest, src, nelems, pe)\n\n"+
		"@triton.jit\ndef p(dest, src, nelems, pe):\n    be.put(dest, src, nelems, pe)\n", "")
	if err != nil || !strings.Contains(out, "k is not served: it calls put, which only rocSHMEM's module") || !strings.Contains(out, "p(dest, src, nelems, pe) serves put as mine.put_block") {
		t.Errorf("%v\n%s", err, out)
	}
}

// The entry of a put in place, run block by block against the stand-in for Triton:
// each block first puts its part of src into its own dst (rank 0 is this rank, as the
// stand-in's my_pe says), then calls the kernel so that its puts, a chunk_per_wg at a
// time, cover exactly its part of dst on the peer, each followed by a quiet where the
// kernel quiets; together the blocks put every byte once.
func TestTorchEntriesPutInPlace(t *testing.T) {
	needPython(t)
	sigs, err := kernelbuild.WriteSignatures(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const (
		dst, src, nbytes, chunk, per = 4096, 8192, 40, 16, 8
	)
	for _, fn := range []string{"my_parallel_put_quiet_kernel", "my_parallel_put_no_quiet_kernel"} {
		entry := "put_block_fn_" + fn + "_chunk_per_wg_8"
		var launches []string
		for b := 0; b < (nbytes+chunk-1)/chunk; b++ {
			launches = append(launches, fmt.Sprintf(`["%s",%d,{"dst":[%d,"*i8"],"src":[%d,"*i8"],"nbytes":[%d,"i64"],"chunk":[%d,"i64"],"peer":[1,"i32"]}]`,
				entry, b, dst, src, nbytes, chunk))
		}
		cmd := exec.Command("python3", "testdata/faketriton/entries.py", "../..", sigs, shmemTests, "8", "nbi=0", "chunk_per_wg="+fmt.Sprint(per))
		cmd.Env = append(os.Environ(), "PYTHONPATH=testdata/faketriton")
		cmd.Stdin = strings.NewReader("[" + strings.Join(launches, ",") + "]")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", fn, err, out)
		}
		local, remote := map[int]int{}, map[int]int{}
		for b, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var calls [][3]json.RawMessage
			if err := json.Unmarshal([]byte(line), &calls); err != nil {
				t.Fatalf("%s: block %d: %v: %s", fn, b, err, line)
			}
			var names []string
			for _, c := range calls {
				var name string
				var args []int
				json.Unmarshal(c[0], &name)
				json.Unmarshal(c[1], &args)
				if name == "nvshmem_my_pe" { // the stand-in's: rank 0
					continue
				}
				names = append(names, name)
				if name != "nvshmemx_putmem_block" {
					continue
				}
				to, from, n, pe := args[0], args[1], args[2], args[3]
				switch {
				case pe == 0 && len(names) == 1: // its own part of src into its own dst, first
					if to-dst != from-src || to != dst+b*chunk {
						t.Errorf("%s: block %d copies %d bytes from %d to %d", fn, b, n, from, to)
					}
					for k := 0; k < n; k++ {
						local[to-dst+k]++
					}
				case pe == 1 && to == from && n <= per:
					for k := 0; k < n; k++ {
						remote[to-dst+k]++
					}
				default:
					t.Errorf("%s: block %d: put %v", fn, b, args)
				}
			}
			quiets := strings.Count(strings.Join(names, " "), "nvshmem_quiet")
			puts := strings.Count(strings.Join(names, " "), "nvshmemx_putmem_block") - 1
			if names[1] != "tl.debug_barrier" || fn == "my_parallel_put_quiet_kernel" && quiets != puts || fn != "my_parallel_put_quiet_kernel" && quiets != 0 {
				t.Errorf("%s: block %d called %v", fn, b, names)
			}
		}
		for k := 0; k < nbytes; k++ {
			if local[k] != 1 || remote[k] != 1 {
				t.Errorf("%s: byte %d copied %d times, put %d times, want once each", fn, k, local[k], remote[k])
				break
			}
		}
		if len(remote) != nbytes {
			t.Errorf("%s: %d bytes put, want %d", fn, len(remote), nbytes)
		}
	}
}

// The entries of the puts in place to every peer, run block by block against the
// stand-in for Triton on jobs of 2, 3 and 4 ranks, from rank 0 and from another: each
// block puts its chunk into place here first, then calls the kernel so that its puts
// cover its chunk of dst on every other rank, never on its own; together the blocks put
// every byte once to each peer. The striped kernel runs on a block per chunk and peer
// (the grid times the peers), each block of a chunk putting it into place.
func TestTorchEntriesPutInPlaceToEveryPeer(t *testing.T) {
	needPython(t)
	sigs, err := kernelbuild.WriteSignatures(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const (
		dst, src, nbytes, chunk, per = 4096, 8192, 40, 16, 8
	)
	for _, tc := range []struct {
		fn, entry string
		striped   bool
	}{
		{"my_parallel_put_allpeers_quiet_kernel", "put_block_fn_my_parallel_put_allpeers_quiet_kernel_chunk_per_wg_8", false},
		{"my_parallel_put_striped_peers_quiet_kernel", "put_block_fn_my_parallel_put_striped_peers_quiet_kernel_chunk_per_wg_per_peer_8", true},
	} {
		for _, job := range [][2]int{{2, 0}, {3, 0}, {4, 0}, {3, 2}} {
			npes, me := job[0], job[1]
			blocks, copies := (nbytes+chunk-1)/chunk, 1
			if tc.striped {
				blocks, copies = blocks*(npes-1), npes-1
			}
			var launches []string
			for b := 0; b < blocks; b++ {
				launches = append(launches, fmt.Sprintf(`["%s",%d,{"dst":[%d,"*i8"],"src":[%d,"*i8"],"nbytes":[%d,"i64"],"chunk":[%d,"i64"],"peer":[1,"i32"]},0,{"nvshmem_n_pes":%d,"nvshmem_my_pe":%d}]`,
					tc.entry, b, dst, src, nbytes, chunk, npes, me))
			}
			cmd := exec.Command("python3", "testdata/faketriton/entries.py", "../..", sigs, shmemTests, "8", "nbi=0", "chunk_per_wg="+fmt.Sprint(per), "chunk_per_wg_per_peer="+fmt.Sprint(per))
			cmd.Env = append(os.Environ(), "PYTHONPATH=testdata/faketriton")
			cmd.Stdin = strings.NewReader("[" + strings.Join(launches, ",") + "]")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", tc.fn, err, out)
			}
			where := fmt.Sprintf("%s, rank %d of %d", tc.fn, me, npes)
			local, remote := map[int]int{}, map[int]map[int]int{}
			for b, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				var calls [][3]json.RawMessage
				if err := json.Unmarshal([]byte(line), &calls); err != nil {
					t.Fatalf("%s: block %d: %v: %s", where, b, err, line)
				}
				var names []string
				puts := 0
				for _, c := range calls {
					var name string
					var args []int
					json.Unmarshal(c[0], &name)
					json.Unmarshal(c[1], &args)
					if name == "nvshmem_my_pe" || name == "nvshmem_n_pes" {
						continue
					}
					names = append(names, name)
					if name != "nvshmemx_putmem_block" {
						continue
					}
					to, from, n, pe := args[0], args[1], args[2], args[3]
					part := b
					if tc.striped {
						part = b / (npes - 1)
					}
					switch {
					case pe == me && len(names) == 1: // its chunk of src into its own dst, first
						if to-dst != from-src || to != dst+part*chunk {
							t.Errorf("%s: block %d copies %d bytes from %d to %d", where, b, n, from, to)
						}
						for k := 0; k < n; k++ {
							local[to-dst+k]++
						}
					case pe != me && pe >= 0 && pe < npes && to == from && n <= per && to >= dst+part*chunk && to+n <= dst+min((part+1)*chunk, nbytes):
						puts++
						if remote[pe] == nil {
							remote[pe] = map[int]int{}
						}
						for k := 0; k < n; k++ {
							remote[pe][to-dst+k]++
						}
					default:
						t.Errorf("%s: block %d: put %v", where, b, args)
					}
				}
				// A quiet after each call: its put to one peer, or its puts to every peer.
				made := puts
				if !tc.striped {
					made = puts / (npes - 1)
				}
				if names[1] != "tl.debug_barrier" || strings.Count(strings.Join(names, " "), "nvshmem_quiet") != made {
					t.Errorf("%s: block %d called %v", where, b, names)
				}
			}
			for k := 0; k < nbytes; k++ {
				if local[k] != copies {
					t.Errorf("%s: byte %d copied into place %d times, want %d", where, k, local[k], copies)
					break
				}
			}
			for q := 0; q < npes; q++ {
				want := 1
				if q == me {
					want = 0
				}
				for k := 0; k < nbytes; k++ {
					if remote[q][k] != want {
						t.Errorf("%s: byte %d put to rank %d %d times, want %d", where, k, q, remote[q][k], want)
						break
					}
				}
			}
		}
	}
}

// The file builds whole with a stand-in for Triton, against symmem's copy of the
// modules (no torch here): its gate, its torch imports, its test class and its
// tritonblas imports stay out of what is compiled; the kernels load as implementations
// run and bench take, the puts in place each a variant serving put.
func TestKernelsBuildShmemTestsWhole(t *testing.T) {
	needPython(t)
	fake, err := filepath.Abs("testdata/faketriton")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", fake)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	out := filepath.Join(t.TempDir(), "out")
	o := &KernelsBuildOptions{File: shmemTests, Arch: []int{90}, Warps: []int{4}, Out: out, Name: "st", Consts: []string{"nbi=0,1"}}
	var stdout, stderr bytes.Buffer
	if err := runKernelsBuild(context.Background(), o, IO{Out: &stdout, Err: &stderr}); err != nil {
		t.Fatalf("%v\n%s%s", err, stdout.String(), stderr.String())
	}
	for _, w := range []string{"built against symmem's copy of PyTorch's SHMEM modules (no torch here)", "torch not imported", "timing: "} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("the build does not say %q:\n%s", w, stdout.String())
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
	c, err := kernels.LoadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	impls, err := symmem.ImplementationsWith(out, binaryBackends)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry(impls)
	for impl, want := range map[string]string{
		"st": "put, get?, put-signal, all-reduce, broadcast, all-to-all, signal, put-flag, barrier, all-gather-matmul, get-add",
		"st[fn=my_fused_matmul_allgather_put_persistent_kernel]": "all-gather-matmul",
		"st[nbi=0]":                                         "get",
		"st[nbi=1]":                                         "get",
		"st[fn=my_put_quiet_kernel]":                        "put",
		"st[fn=my_parallel_put_quiet_kernel]":               "put",
		"st[fn=my_parallel_put_no_quiet_kernel]":            "put",
		"st[fn=my_parallel_put_allpeers_quiet_kernel]":      "put",
		"st[fn=my_parallel_put_striped_peers_quiet_kernel]": "put",
	} {
		im, ok := reg.byName(impl)
		if want = strings.Replace(want, "get?, ", "", 1); !ok || opNames(im.Ops) != want {
			t.Errorf("%s: %v, serves %v, want %s", impl, ok, im.Ops, want)
		}
	}
	matmuls, getAdds := 0, 0
	for _, a := range c.Artifacts {
		if a.Kernel == "all_gather_matmul_f16" {
			matmuls++
			if !slices.Equal(a.Tile, []int{64, 64, 32}) || a.Grid != 0 {
				t.Errorf("%s: tile %v, grid %d: want the tile 64 x 64 x 32 and symmem's grid", a.Name(), a.Tile, a.Grid)
			}
		}
		if strings.Contains(a.Impl, "parallel") && (a.Grid != 0 || a.Cooperative || !strings.Contains(a.Wraps, "in place") || !a.InPlace) {
			t.Errorf("%s: grid %d, cooperative %v, wraps %q: want symmem's grid", a.Name(), a.Grid, a.Cooperative, a.Wraps)
		}
		// get-add's kernels record their block, which run holds a count to.
		if strings.HasPrefix(a.Kernel, "get_add_") {
			getAdds++
			if a.Impl != "st" || a.MaxElems != 1024 || a.MaxElemsConst != "block_size" || a.Grid != 0 || a.Cooperative {
				t.Errorf("%s: max_elems %d of %q, grid %d, cooperative %v: want 1024 of block_size, symmem's grid", a.Name(), a.MaxElems, a.MaxElemsConst, a.Grid, a.Cooperative)
			}
		}
		// The puts in place to every peer say so, the striped one runs a block per chunk
		// and peer, and both serve the job sizes their world size was built for.
		every, striped := strings.Contains(a.Impl, "peers"), strings.Contains(a.Impl, "striped")
		if a.Peers == kernels.PeersAll != every || a.PerPeer != striped || every != slices.Equal(a.Ranks, []int{2, 3, 4, 5, 6, 7, 8}) {
			t.Errorf("%s: peers %q, per_peer %v, ranks %v", a.Name(), a.Peers, a.PerPeer, a.Ranks)
		}
	}
	if getAdds != 6 {
		t.Errorf("%d get-add kernels built, want 6 (one per element type)", getAdds)
	}
	if matmuls != 2 {
		t.Errorf("%d all_gather_matmul_f16 artifacts, want the two fused matmul kernels'", matmuls)
	}
}

// An unchanged file built again with the same options and toolchain is not rebuilt, and
// says so; an edit, another option or a missing artifact rebuilds it. Each build says
// where its time went and records it.
func TestKernelsBuildUnchanged(t *testing.T) {
	needPython(t)
	fake, err := filepath.Abs("testdata/faketriton")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", fake)
	dir := t.TempDir()
	file := filepath.Join(dir, "seed_put.py")
	seed, err := os.ReadFile("../../examples/seed_put.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, seed, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	build := func(warps ...int) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		o := &KernelsBuildOptions{File: file, Arch: []int{90}, Warps: warps, Out: out}
		if err := runKernelsBuild(context.Background(), o, IO{Out: &stdout, Err: &stderr}); err != nil {
			t.Fatalf("%v\n%s%s", err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	const same = "unchanged since its build of "
	rebuilt := func(what, got string) {
		t.Helper()
		if strings.Contains(got, same) || !strings.Contains(got, "wrote seed-put.put_block.w4.sm90.cubin") || !strings.Contains(got, "timing: ") {
			t.Errorf("%s: not rebuilt:\n%s", what, got)
		}
	}
	rebuilt("first build", build(4))
	cubin := filepath.Join(out, "seed-put.put_block.w4.sm90.cubin")
	before, err := os.Stat(cubin)
	if err != nil {
		t.Fatal(err)
	}
	got := build(4)
	if !strings.Contains(got, same) || !strings.Contains(got, "nothing rebuilt") || strings.Contains(got, "wrote ") {
		t.Errorf("unchanged: rebuilt:\n%s", got)
	}
	if after, _ := os.Stat(cubin); !after.ModTime().Equal(before.ModTime()) {
		t.Error("unchanged: the cubin was written again")
	}
	var rec struct {
		Key    string            `json:"key"`
		Files  map[string]string `json:"files"`
		Timing struct {
			Phases [][2]any `json:"phases"`
		} `json:"timing"`
	}
	b, err := os.ReadFile(filepath.Join(out, "seed-put.build.json"))
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil || len(rec.Key) != 64 || len(rec.Files) != 3 || len(rec.Timing.Phases) < 5 {
		t.Errorf("the record: %v: %s", err, b)
	}
	rebuilt("another --warps", build(4, 8))
	rebuilt("back to --warps 4", build(4))
	if err := os.WriteFile(file, append(seed, "\n# edited\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	rebuilt("the file edited", build(4))
	if err := os.Remove(cubin); err != nil {
		t.Fatal(err)
	}
	rebuilt("an artifact removed", build(4))
	if got := build(4); !strings.Contains(got, same) {
		t.Errorf("unchanged after the rebuilds: rebuilt:\n%s", got)
	}
}

// fakeTorch writes a torch package for PYTHONPATH whose SHMEM modules are symmem's copy
// under torch's names (the generic one only with generic), and which appends its
// process id to log each time it is imported.
func fakeTorch(t *testing.T, generic bool, log string) string {
	t.Helper()
	dir := t.TempDir()
	names := []string{"put", "get", "get_nbi", "putmem_signal_block", "signal_wait_until", "signal_op", "wait_until", "fence", "quiet",
		"my_pe", "n_pes", "barrier_all", "sync_all", "alltoall", "broadcast", "reduce", "requires_nvshmem"}
	var nv strings.Builder
	nv.WriteString("import nvshmem_torch as _s\n")
	for _, n := range names {
		fmt.Fprintf(&nv, "%s = _s.%s\n", n, n)
	}
	files := map[string]string{
		"torch/__init__.py":                                      fmt.Sprintf("import os\nwith open(%q, \"a\") as f:\n    f.write(\"%%d\\n\" %% os.getpid())\n", log),
		"torch/distributed/__init__.py":                          "",
		"torch/distributed/_symmetric_memory/__init__.py":        "",
		"torch/distributed/_symmetric_memory/_nvshmem_triton.py": nv.String(),
	}
	if generic {
		files["torch/distributed/_symmetric_memory/_shmem_triton.py"] = "from . import _nvshmem_triton\n\n\n" +
			"def get_shmem_backend_module():\n    return _nvshmem_triton\n\n\ndef requires_shmem(f):\n    return f\n"
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Whose module a build uses is decided from torch's files, without importing torch:
// torch's where it has every module and name the kernels use, else symmem's copy; torch
// is imported only when its module is the one used, and then once for all the compiles.
func TestKernelsBuildTorchModuleChoice(t *testing.T) {
	needPython(t)
	fake, err := filepath.Abs("testdata/faketriton")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, name string
		generic    bool
		want       string
		imports    int
	}{
		{"../../examples/torch_kernels.py", "tk", false, "built against torch (no version)'s SHMEM modules", 1},
		{shmemTests, "st", false, "built against symmem's copy of PyTorch's SHMEM modules (torch (no version) has no _shmem_triton)", 0},
		{shmemTests, "st", true, "built against torch (no version)'s SHMEM modules", 1},
		{"../../examples/seed_put.py", "seed", true, "built against symmem's copy of PyTorch's SHMEM modules (torch (no version) has no putmem_block in _nvshmem_triton)", 0},
	} {
		log := filepath.Join(t.TempDir(), "imports")
		t.Setenv("PYTHONPATH", fake+string(os.PathListSeparator)+fakeTorch(t, tc.generic, log))
		o := &KernelsBuildOptions{File: tc.file, Arch: []int{90}, Warps: []int{4, 8, 32}, Out: filepath.Join(t.TempDir(), "out"), Name: tc.name, Consts: []string{"nbi=0"}}
		if tc.name != "st" {
			o.Consts = nil
		}
		var stdout, stderr bytes.Buffer
		if err := runKernelsBuild(context.Background(), o, IO{Out: &stdout, Err: &stderr}); err != nil {
			t.Fatalf("%s: %v\n%s%s", tc.file, err, stdout.String(), stderr.String())
		}
		b, _ := os.ReadFile(log)
		imported := len(strings.Fields(string(b)))
		says := map[int]string{0: "torch not imported", 1: "torch imported once"}[tc.imports]
		if !strings.Contains(stdout.String(), tc.want) || imported != tc.imports || !strings.Contains(stdout.String(), says) {
			t.Errorf("%s (generic module %v): torch imported %d times, want %d; want %q and %q in\n%s", tc.file, tc.generic, imported, tc.imports, tc.want, says, stdout.String())
		}
	}
}
