package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/kernelbuild"
)

// A kernel that gets, then stores what it computes with what it got serves get-add,
// its parameters bound by use whatever their names: the get's destination is tmp, its
// source src, its count the elements, its rank the peer; the tl.store pointer's
// parameter dst, the other tl.load's local, the tl.constexpr its tl.arange spans the
// most elements one program adds. Shapes get-add cannot run are refused, each saying
// why.
func TestKernelsBuildGetAddShapes(t *testing.T) {
	needPython(t)
	head := "import triton\nimport triton.language as tl\nimport torch.distributed._symmetric_memory._nvshmem_triton as nvshmem\n\n"
	kernel := func(params, get, body string) string {
		if body == "" {
			body = "    x = tl.arange(0, B)\n    m = x < n\n    tl.store(o + x, tl.load(a + x, mask=m) + tl.load(t + x, mask=m), mask=m)\n"
		}
		return head + "@triton.jit\ndef ga(" + params + "):\n    " + get + "\n" + body
	}
	const params, get = "o, a, r, t, n, who, B: tl.constexpr", "nvshmem.get(t, r, n, who)"
	out, err := checkFile(t, kernel(params, get, ""), "")
	want := "ga(o, a, r, t, n, who, B: tl.constexpr) serves get-add as mine.get_add_f32: o=dst (*fp32), a=local (*fp32), r=src (*fp32), t=tmp (*fp32), n=nelem, " +
		"who=peer, B=1024 (the most elements one program adds; --const B=N for another, a power of two); block 0 runs it (it reads no program id)"
	if err != nil || !strings.Contains(out, want) || !strings.Contains(out, "serves get-add:bf16 as mine.get_add_bf16: o=dst (*bf16),") {
		t.Errorf("by use: %v, want %q in\n%s", err, want, out)
	}
	why := "no kernel symmem serves (ga: it gets (nvshmem.%s) and computes with what it got, storing the result (tl.store): get-add (out = local + remote), but "
	for _, tc := range []struct{ name, params, get, body, want string }{
		{"a peer of its own", params, "nvshmem.get(t, r, n, 1)", "", fmt.Sprintf(why, "get") + "its get's peer (1) is not a parameter of its own: symmem passes the rank get-add gets from"},
		{"a block of no parameter", params, get, "    x = tl.arange(0, 1024)\n    tl.store(o + x, tl.load(a + x) + tl.load(t + x))\n",
			"its block (the size of its tl.arange) is not one tl.constexpr parameter: symmem gives the most elements one program adds at build time"},
		{"no operand of its own", params, get, "    x = tl.arange(0, B)\n    tl.store(o + x, tl.load(t + x) * 2)\n",
			"it loads nothing besides what it got: get-add adds one operand of its own (local), each pointer a parameter"},
		{"two operands of its own", params + ", c", get, "    x = tl.arange(0, B)\n    tl.store(o + x, tl.load(a + x) + tl.load(c + x) + tl.load(t + x))\n",
			"it loads a, c besides what it got"},
		{"what it got never read", params, get, "    x = tl.arange(0, B)\n    tl.store(o + x, tl.load(a + x) + 1)\n", "it never loads what it got (tl.load of t)"},
		{"two stores", params, get, "    x = tl.arange(0, B)\n    tl.store(o + x, tl.load(a + x) + tl.load(t + x))\n    tl.store(a + x, tl.load(t + x))\n",
			"it stores 2 times (tl.store): get-add stores its sum once, into dst"},
		{"a store into what it got", params, get, "    x = tl.arange(0, B)\n    tl.store(t + x, tl.load(a + x) + tl.load(t + x))\n",
			"it stores into t, which it also gets or loads"},
		{"a grid", params, get, "    x = tl.program_id(0) * B + tl.arange(0, B)\n    tl.store(o + x, tl.load(a + x) + tl.load(t + x))\n",
			"it reads its program id: symmem launches get-add's kernel on one block"},
		{"addresses and bytes", params, "nvshmem.getmem_block(t, r, n, who)", "", fmt.Sprintf(why, "getmem_block") + "it gets with nvshmem.getmem_block, on addresses and bytes"},
		{"a get not waited for", params, "nvshmem.get_nbi(t, r, n, who)", "", fmt.Sprintf(why, "get_nbi") + "it gets with nvshmem.get_nbi and never waits for it (nvshmem.quiet) before it adds"},
		{"two gets", params, get + "\n    " + get, "", "it gets 2 times: get-add gets the peer's operand once"},
		{"a count fixed at build time", "o, a, r, t, n: tl.constexpr, who, B: tl.constexpr", get, "",
			"ga (for get-add): parameter 'n' is a tl.constexpr, but symmem passes get-add's nelems at run time: drop tl.constexpr"},
	} {
		_, err := checkFile(t, kernel(tc.params, tc.get, tc.body), "")
		if err == nil || symmem.ExitCode(err) != exitcode.Usage || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v (exit %d), want one line with %q", tc.name, err, symmem.ExitCode(err), tc.want)
		}
	}
	// get_nbi then quiet is waited for.
	if out, err := checkFile(t, kernel(params, "nvshmem.get_nbi(t, r, n, who)\n    nvshmem.quiet()", ""), ""); err != nil || !strings.Contains(out, "serves get-add as mine.get_add_f32: o=dst") {
		t.Errorf("get_nbi then quiet: %v\n%s", err, out)
	}
}

// The get-add entry runs the user's kernel on block 0 alone with the arguments of
// symmem's signature: the get moves the message's elements of src on the peer into
// tmp, the block spans symmem's 1024 elements (or --const's), and the sum is stored
// into dst; the other blocks of a grid do nothing.
func TestTorchEntriesGetAdd(t *testing.T) {
	needPython(t)
	sigs, err := kernelbuild.WriteSignatures(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const dst, local, src, tmp, n = 4096, 8192, 12288, 16384, 1000
	for _, tc := range []struct {
		entry, ptr string
		size       int
		consts     []string
		block      int
	}{
		{"get_add_f32", "*fp32", 4, nil, 1024},
		{"get_add_bf16", "*bf16", 2, nil, 1024},
		{"get_add_f32_block_size_4096", "*fp32", 4, []string{"block_size=4096"}, 4096},
	} {
		var launches []string
		for b := 0; b < 2; b++ {
			launches = append(launches, fmt.Sprintf(`["%s",%d,{"dst":[%d,"%s"],"local":[%d,"%s"],"src":[%d,"%s"],"tmp":[%d,"%s"],"nelem":[%d,"i64"],"peer":[1,"i32"]}]`,
				tc.entry, b, dst, tc.ptr, local, tc.ptr, src, tc.ptr, tmp, tc.ptr, n))
		}
		cmd := exec.Command("python3", append([]string{"testdata/faketriton/entries.py", "../..", sigs, shmemTests, "8", "nbi=0"}, tc.consts...)...)
		cmd.Env = append(os.Environ(), "PYTHONPATH=testdata/faketriton")
		cmd.Stdin = strings.NewReader("[" + strings.Join(launches, ",") + "]")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.entry, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 2 || lines[1] != "[]" {
			t.Fatalf("%s: block 1 called %v", tc.entry, lines)
		}
		var calls [][3]json.RawMessage
		if err := json.Unmarshal([]byte(lines[0]), &calls); err != nil {
			t.Fatalf("%s: %v: %s", tc.entry, err, lines[0])
		}
		var got []string
		for _, c := range calls {
			got = append(got, string(c[0])+string(c[1]))
		}
		want := []string{
			fmt.Sprintf(`"nvshmemx_getmem_block"[%d, %d, %d, 1]`, tmp, src, n*tc.size),
			fmt.Sprintf(`"tl.arange"[0, %d]`, tc.block),
			fmt.Sprintf(`"tl.store"[%d, 0]`, dst),
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: called %v, want %v", tc.entry, got, want)
		}
	}
}
