package kernels

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/symmem/symmem/internal/ops"
)

// testdata/user holds real artifacts built on the GPU machine: symmem's own Triton
// put_block (sm_90a cubin and compute_80 PTX) and get_block (sm_90a), 8 warps, with
// their sidecars relabelled as the implementation "myput" and the sources they were
// built from beside them.
const userDir = "testdata/user"

func TestLoadDirReadsTheUsersKernels(t *testing.T) {
	c, err := LoadDir(userDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Impls(), ","); got != "myput" {
		t.Errorf("impls %s, want myput", got)
	}
	if got := strings.Join(c.Kernels("myput"), ","); got != "get_block,put_block" {
		t.Errorf("kernels %s", got)
	}
	for _, tc := range []struct {
		cc     int
		format string
	}{{90, "cubin"}, {80, "ptx"}, {100, "ptx"}} {
		a, err := c.Select("myput", "put_block", 8, tc.cc)
		if err != nil || a.Format != tc.format {
			t.Errorf("sm_%d: %v %v, want %s", tc.cc, a, err, tc.format)
		}
	}
	a, _ := c.Select("myput", "put_block", 8, 90)
	if want := filepath.Join(userDir, "myput.put_block.w8.sm90.cubin"); a.Path() != want {
		t.Errorf("path %s, want %s", a.Path(), want)
	}
	if b, err := a.Data(); err != nil || len(b) != 24152 {
		t.Errorf("data: %d bytes, %v", len(b), err)
	}
	if args, err := a.Args(1, 2, 3, 4, 5); err != nil || len(args) != 7 {
		t.Errorf("args %v %v", args, err)
	}
	if _, err := c.Select("myput", "put_block", 4, 90); err == nil || !strings.Contains(err.Error(), "built for [8] warps, not 4") {
		t.Errorf("4 warps: %v", err)
	}
	if _, err := c.Select("myput", "put_signal_block", 0, 90); err == nil || !strings.Contains(err.Error(), "in "+userDir) {
		t.Errorf("a kernel the directory lacks: %v", err)
	}
}

// copyUser copies testdata/user to a fresh directory for a test to break.
func copyUser(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ents, err := os.ReadDir(userDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(userDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// editSidecar rewrites one sidecar of dir through f.
func editSidecar(t *testing.T, dir, name string, f func(m map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func params(m map[string]any) []any { return m["params"].([]any) }

const sm90 = "myput.put_block.w8.sm90.cubin.json"

// Every refusal LoadDir makes, each on a copy of the real artifacts with one thing
// broken; the message names the file and what to do.
func TestLoadDirRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, dir string)
		want    string
	}{
		{"garbled sidecar", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, sm90), []byte("{not json"), 0o644)
		}, sm90 + " is not a kernel sidecar"},
		{"sidecar without target", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { delete(m, "target") })
		}, sm90 + " lacks target: rebuild it"},
		{"a grid no collective runs", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["grid"] = 500 })
		}, sm90 + ": grid 500: want 0 (symmem's grid) to 128 blocks: rebuild it"},
		{"peers no build writes", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["peers"] = "some" })
		}, sm90 + `: peers "some": want "all" (its puts reach every other rank) or none (the peer it is given): rebuild it`},
		{"a get reaching every peer", func(t *testing.T, dir string) {
			editSidecar(t, dir, "myput.get_block.w8.sm90.cubin.json", func(m map[string]any) { m["peers"] = "all" })
		}, `myput.get_block.w8.sm90.cubin.json: peers "all": only a put kernel (put_block) reaches its peers by itself, not get_block: rebuild it`},
		{"a block per peer of a put to one peer", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["per_peer"] = true })
		}, sm90 + `: per_peer: a block per chunk and peer is for a kernel on symmem's grid whose puts reach every peer (peers "all", no grid): rebuild it`},
		{"a job of one rank", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["ranks"] = []int{2, 1} })
		}, sm90 + `: ranks [2 1]: want job sizes of 2 ranks or more: rebuild it`},
		{"a link without NVSHMEM", func(t *testing.T, dir string) {
			editSidecar(t, dir, "myput.put_block.w8.sm80.ptx.json", func(m map[string]any) {
				m["link"], m["uses_nvshmem"], m["nvshmem_device_version"] = []string{DeviceArchive}, false, []int{}
			})
		}, `myput.put_block.w8.sm80.ptx.json: links libnvshmem_device.a but says it does not use NVSHMEM (uses_nvshmem): rebuild it`},
		{"a cubin to link", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["link"] = []string{DeviceArchive} })
		}, sm90 + `: link "libnvshmem_device.a": symmem links only PTX, and only with libnvshmem_device.a: rebuild it`},
		{"unknown format", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["format"] = "fatbin" })
		}, `format "fatbin", want cubin or ptx`},
		{"renamed parameter", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { params(m)[2] = map[string]any{"name": "count", "type": "i64"} })
		}, `parameter 3 is "count" (i64), symmem passes "nbytes" (i64) there: put_block takes (dst, src, nbytes, chunk, peer)`},
		{"wrong parameter type", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { params(m)[4] = map[string]any{"name": "peer", "type": "i64"} })
		}, `parameter 5 is "peer" (i64), symmem passes "peer" (i32) there`},
		{"missing parameter", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { p := params(m); m["params"] = append(p[:4:4], p[5:]...) })
		}, `parameter "peer" (i32) is missing`},
		{"extra parameter", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) {
				p := params(m)
				m["params"] = append(append(p[:5:5], map[string]any{"name": "flags", "type": "i32"}), p[5:]...)
			})
		}, `parameter "flags" (i32) is one symmem does not pass`},
		{"scratch memory", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["global_scratch_size"] = 64 })
		}, "needs 64 bytes of global and 0 of profile scratch"},
		{"unknown kernel", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["kernel"] = "all_reduce" })
		}, `symmem launches no kernel "all_reduce"`},
		{"kernel file missing", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "myput.put_block.w8.sm90.cubin"))
		}, "its kernel myput.put_block.w8.sm90.cubin is not in"},
		{"kernel file changed", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "myput.put_block.w8.sm90.cubin")
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 1
			os.WriteFile(p, b, 0o644)
		}, "the file changed after the build"},
		{"source changed", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "symmem_kernels.py")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, "# edited\n"...), 0o644)
		}, "the source changed since the build; rebuild it with symmem kernels build FILE.py --out DIR"},
		{"sidecar of another shape", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, sm90), []byte("[]"), 0o644)
		}, sm90 + " is not a kernel sidecar (it holds a list, want an object): rebuild it"},
		{"field of another type", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["arch"] = "90" })
		}, "(field arch holds a string, want a number)"},
		{"dangling sidecar link", func(t *testing.T, dir string) {
			os.Symlink(filepath.Join(dir, "gone.json"), filepath.Join(dir, "x.ptx.json"))
		}, filepath.Join("/", "x.ptx.json") + " is a link to "},
		// A tampered directory must not hang or fill memory: a sidecar that is a named
		// pipe waited for a writer forever, a kernel linked to /dev/zero was read until
		// memory ran out.
		{"sidecar that is a named pipe", func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "x.ptx.json"), 0o600); err != nil {
				t.Skip("no named pipes here:", err)
			}
		}, "x.ptx.json is a named pipe, not a file: remove it or rebuild it"},
		{"kernel that is a device", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "myput.put_block.w8.sm90.cubin")
			os.Remove(p)
			os.Symlink("/dev/zero", p)
		}, "myput.put_block.w8.sm90.cubin is a device, not a file: rebuild it"},
		{"kernel that is too large", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, "myput.put_block.w8.sm90.cubin"), maxKernel+1); err != nil {
				t.Fatal(err)
			}
		}, "myput.put_block.w8.sm90.cubin holds more than 256M: rebuild it"},
		{"source that is a named pipe", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "symmem_kernels.py")
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skip("no named pipes here:", err)
			}
		}, "symmem_kernels.py is a named pipe, not a file: remove it or rebuild it"},
		// Names from a sidecar become --impl names and table cells; numbers, launch
		// settings. A hand-edited one was listed as usable.
		{"impl that is a path", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["impl"] = "../../etc/passwd" })
		}, `impl "../../etc/passwd" is not a name`},
		{"impl with a comma", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["impl"] = "my put,x" })
		}, `impl "my put,x" is not a name`},
		{"impl with a terminal escape", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["impl"] = "x\x1b]0;owned\x07" })
		}, `impl "x\x1b]0;owned\a" is not a name`},
		{"negative warps", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["num_warps"] = -8 })
		}, "num_warps -8: want a power of two from 1 to 32"},
		{"file outside the directory", func(t *testing.T, dir string) {
			editSidecar(t, dir, sm90, func(m map[string]any) { m["file"] = "../x.cubin" })
		}, `file "../x.cubin" must lie beside its sidecar`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyUser(t)
			tc.breakIt(t, dir)
			_, err := LoadDir(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLoadDirWithoutSourcesIsNotRefused(t *testing.T) {
	dir := copyUser(t)
	os.Remove(filepath.Join(dir, "symmem_kernels.py"))
	if _, err := LoadDir(dir); err != nil {
		t.Fatal(err)
	}
}

func TestLoadDirEmptyAndMissing(t *testing.T) {
	if _, err := LoadDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no kernel sidecars") {
		t.Errorf("empty: %v", err)
	}
	if _, err := LoadDir(filepath.Join(t.TempDir(), "nope")); err == nil || !strings.Contains(err.Error(), "no such file or directory: give the --out directory of symmem kernels build") {
		t.Errorf("missing: %v", err)
	}
	if _, err := LoadDir(filepath.Join(userDir, sm90)); err == nil || !strings.Contains(err.Error(), "is a file, not a directory") {
		t.Errorf("a file: %v", err)
	}
}

// collectiveParams are the parameters of symmem's collective kernels, in order.
var collectiveParams = map[string]string{
	"reduce_bf16":         "send,recv,count,chunk,in_off,out_off,push,extra,pad,state,me,n,limit_ns,mailbox,op,global_scratch,profile_scratch",
	"reduce_f32":          "send,recv,count,chunk,in_off,out_off,push,extra,pad,state,me,n,limit_ns,mailbox,op,global_scratch,profile_scratch",
	"reduce_staged_bf16":  "send,recv,scratch,nelem,shard,chunk,sub,pad,state,me,n,limit_ns,mailbox,op,global_scratch,profile_scratch",
	"push":                "send,recv,nbytes,chunk,src_stride,dst_off,root,pad,state,me,n,limit_ns,mailbox,global_scratch,profile_scratch",
	"barrier":             "pad,state,me,n,limit_ns,mailbox,global_scratch,profile_scratch",
	"push_ll":             "send,recv,area,cap,nwords,chunk,src_stride,dst_stride,root,deliver,pad,state,me,n,limit_ns,mailbox,global_scratch,profile_scratch",
	"reduce_push_bf16":    "send,recv,area,cap,nelem,chunk,stride,deliver,pad,state,me,n,limit_ns,mailbox,op,global_scratch,profile_scratch",
	"reduce_push_f32":     "send,recv,area,cap,nelem,chunk,stride,deliver,pad,state,me,n,limit_ns,mailbox,op,global_scratch,profile_scratch",
	"reduce_ll_bf16":      "send,recv,area,cap,nwords,chunk,deliver,pad,state,me,n,limit_ns,mailbox,op,global_scratch,profile_scratch",
	"reduce_ll_f32":       "send,recv,area,cap,nwords,chunk,deliver,pad,state,me,n,limit_ns,mailbox,op,global_scratch,profile_scratch",
	"reduce_ll128_f32":    "send,recv,area,cap,nwords,chunk,deliver,pad,state,me,n,limit_ns,mailbox,op,global_scratch,profile_scratch",
	"reduce_ll128_bf16":   "send,recv,area,cap,nwords,chunk,deliver,pad,state,me,n,limit_ns,mailbox,op,global_scratch,profile_scratch",
	"dispatch":            "send,recv,bounds,rows,pad,state,me,n,limit_ns,mailbox,global_scratch,profile_scratch",
	"combine_staged_bf16": "send,recv,scratch,bounds,pieces,copies,push_bounds,rows,vec,pad,state,me,n,limit_ns,mailbox,global_scratch,profile_scratch",
	"combine_staged_f32":  "send,recv,scratch,bounds,pieces,copies,push_bounds,rows,vec,pad,state,me,n,limit_ns,mailbox,global_scratch,profile_scratch",
	"combine_bf16":        "send,recv,bounds,pieces,copies,vec,pad,state,me,n,limit_ns,mailbox,global_scratch,profile_scratch",
	"combine_f32":         "send,recv,bounds,pieces,copies,vec,pad,state,me,n,limit_ns,mailbox,global_scratch,profile_scratch",
	// The fused matrix products (kernels/triton/symmem_fused.py), which
	// internal/backend/gpu/fused.go passes by name.
	"ag_matmul_bf16": "a,b,c,rows,n,k,pad,state,me,nranks,fault,limit_ns,mailbox,global_scratch,profile_scratch",
	"ag_matmul_f16":  "a,b,c,rows,n,k,pad,state,me,nranks,fault,limit_ns,mailbox,global_scratch,profile_scratch",
	"matmul_rs_bf16": "a,b,c,scratch,m,n,k,pad,state,me,nranks,fault,limit_ns,mailbox,global_scratch,profile_scratch",
	"matmul_rs_f16":  "a,b,c,scratch,m,n,k,pad,state,me,nranks,fault,limit_ns,mailbox,global_scratch,profile_scratch",
}

// syncParams are the parameters of symmem's own kernels of the signal, put-flag and
// barrier operations (triton's and cuda's alike, Triton's hidden scratch pointers left
// out): what internal/backend/gpu/sync.go passes, no user contract.
var syncParams = map[string]string{
	"signal_op":       "sig,op,value,peer",
	"put_flag":        "dst,src,nbytes,flag,value,order,peer",
	"signal_pingpong": "sig,iters,peer,initiator,stamps,limit_ns,mailbox",
	"barrier_all":     "slots,wrong,rnd,me,n,meet",
	"sync_all":        "slots,wrong,rnd,me,n,meet",
}

// nvshmemParams is what internal/backend/gpu/nvshmem.go passes NVSHMEM's own
// collectives (kernels/cuda/nvshmem_collectives.cu), by kernel name prefix.
var nvshmemParams = map[string]string{
	"allreduce_":     "dst,src,nelem,n,op",
	"reducescatter_": "dst,src,nelem,n,op",
	"fcollect":       "dst,src,nbytes",
	"alltoall":       "dst,src,nbytes",
	"broadcast":      "dst,src,nbytes,root",
	"barrier_all":    "slots,wrong,rnd,me,n,meet",
	"sync_all":       "slots,wrong,rnd,me,n,meet",
}

// The embedded catalogue follows the signatures the user's kernels are held to.
func TestEmbeddedKernelsFollowTheSignatures(t *testing.T) {
	for _, a := range Default().Artifacts {
		if a.Kernel == "sm_store" || a.Impl == "nccl-device" {
			// sm_store takes mapped addresses, nccl-device's kernels a window and
			// offsets in it, not symmetric addresses: no user's signature. Their
			// parameters are their manifests' (TestManifestsMatchTheSidecars).
			continue
		}
		if a.Impl == "nvshmem" {
			var got []string
			for _, p := range a.Params {
				got = append(got, p.Name)
			}
			want, ok := nvshmemParams[a.Kernel]
			for prefix, w := range nvshmemParams {
				if strings.HasSuffix(prefix, "_") && strings.HasPrefix(a.Kernel, prefix) {
					want, ok = w, true
				}
			}
			if !ok || strings.Join(got, ",") != want {
				t.Errorf("%s takes (%s), the launcher passes (%s)", a.Name(), strings.Join(got, ","), want)
			}
			continue
		}
		if want, ok := collectiveParams[a.Kernel]; ok {
			// symmem's own collective kernels are no user contract: they take what
			// internal/backend/gpu/collkernels.go passes.
			var got []string
			for _, p := range a.Params {
				got = append(got, p.Name)
			}
			if strings.Join(got, ",") != want {
				t.Errorf("%s takes (%s), the launcher passes (%s)", a.Name(), strings.Join(got, ","), want)
			}
			continue
		}
		if want, ok := syncParams[a.Kernel]; ok {
			var got []string
			for _, p := range a.Params {
				if !p.Hidden {
					got = append(got, p.Name)
				}
			}
			if strings.Join(got, ",") != want {
				t.Errorf("%s takes (%s), the launcher passes (%s)", a.Name(), strings.Join(got, ","), want)
			}
			continue
		}
		if err := a.CheckSignature(); err != nil {
			t.Error(err)
		}
	}
}

// What decides, before a launch, whether the user's kernels load here: the GPUs'
// architecture and the NVSHMEM host library.
func TestCheckLoadAndLoadsOn(t *testing.T) {
	host := [3]int{3, 4, 5}
	c, err := LoadDir(userDir)
	if err != nil {
		t.Fatal(err)
	}
	both := []string{"put_block", "get_block"}
	if err := c.CheckLoad("myput", both, Host{CCs: []int{90, 90}, Lib: host}, 2); err != nil {
		t.Errorf("H200s, NVSHMEM 3.4.5: %v", err)
	}
	// get_block was built for sm_90a only: an A100 cannot load it (put_block has PTX).
	if err := c.CheckLoad("myput", both, Host{CCs: []int{80, 80}, Lib: host}, 2); err == nil ||
		!strings.Contains(err.Error(), "no myput/get_block kernel for sm_80: "+userDir+" has compute_80, sm_90a and no PTX it can use; rebuild with symmem kernels build FILE.py --arch 80") {
		t.Errorf("A100s: %v", err)
	}
	if err := c.CheckLoad("myput", []string{"put_block"}, Host{CCs: []int{80}, Lib: host}, 1); err != nil {
		t.Errorf("put on an A100 through the PTX: %v", err)
	}
	a, _ := c.Select("myput", "put_block", 8, 90)
	if ok, why := a.LoadsOn(Host{CCs: []int{90}, Lib: host}); !ok || why != "yes: GPU 0 (cubin)" {
		t.Errorf("LoadsOn H200: %v %s", ok, why)
	}
	if ok, why := a.LoadsOn(Host{CCs: []int{80}, Lib: host}); ok || !strings.Contains(why, "built for sm_90a, the GPUs here are sm_80: rebuild with --arch 80") {
		t.Errorf("LoadsOn A100: %v %s", ok, why)
	}
	if ok, why := a.LoadsOn(Host{NoGPU: "NVIDIA driver not found"}); ok || why != "no GPU here (NVIDIA driver not found)" {
		t.Errorf("LoadsOn without a GPU: %v %s", ok, why)
	}

	// Built against a newer NVSHMEM device library than the host's.
	dir := copyUser(t)
	editSidecar(t, dir, sm90, func(m map[string]any) { m["nvshmem_device_version"] = []int{3, 5, 0} })
	c, err = LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = c.CheckLoad("myput", []string{"put_block"}, Host{CCs: []int{90}, Lib: host}, 1)
	if err == nil || !strings.Contains(err.Error(), "built against NVSHMEM device library 3.5.0, which host library 3.4.5 cannot serve") {
		t.Errorf("newer device library: %v", err)
	}
	a, _ = c.Select("myput", "put_block", 8, 90)
	if ok, why := a.LoadsOn(Host{CCs: []int{90}, Lib: host}); ok || !strings.Contains(why, "device library 3.5.0 is newer than host library 3.4.5") {
		t.Errorf("LoadsOn, newer device library: %v %s", ok, why)
	}
}

// The same hash the build script records (kernels/build-kernels.py sources_hash).
func TestSourcesHashMatchesTheBuild(t *testing.T) {
	files := map[string][]byte{}
	for _, n := range []string{"nvshmem_device.py", "symmem_kernels.py"} {
		b, err := os.ReadFile(filepath.Join(userDir, n))
		if err != nil {
			t.Fatal(err)
		}
		files[n] = b
	}
	c, _ := LoadDir(userDir)
	if got := sourcesHash(files); got != c.Artifacts[0].SourceSHA256 {
		t.Errorf("hash %s, sidecar %s", got, c.Artifacts[0].SourceSHA256)
	}
}

// A wait kernel may take the wait limit and the mailbox after its signature (and then
// gets them); no other kernel may, and not one of the two alone.
func TestSignatureBoundedWaits(t *testing.T) {
	agm := "a_ptr:ptr b_ptr:ptr c_ptr:ptr m_local:i32 n:i32 k:i32 stride_am:i32 stride_ak:i32 stride_bk:i32 stride_bn:i32 stride_cm:i32 stride_cn:i32 rank:i32 peer:i32"
	mrs := "a_ptr:ptr b_ptr:ptr c_ptr:ptr scratch_ptr:ptr m_local:i32 n:i32 k:i32 stride_am:i32 stride_ak:i32 stride_bk:i32 stride_bn:i32 stride_cm:i32 stride_cn:i32 rank:i32 peer:i32 ranks:i32 step:i32"
	p := func(s string) []Param {
		var out []Param
		for _, f := range strings.Fields(s) {
			n, typ, _ := strings.Cut(f, ":")
			out = append(out, Param{Name: n, Type: typ})
		}
		return out
	}
	for kernel, params := range map[string]string{"all_gather_matmul_f16": agm, "matmul_reduce_scatter_bf16": mrs, "matmul_reduce_scatter_f16": mrs} {
		tiled := &Artifact{Impl: "mine", Kernel: kernel, Params: p(params), Target: "sm_90a", NumWarps: 4, Tile: []int{64, 64, 32}}
		if err := tiled.CheckSignature(); err != nil {
			t.Errorf("a user's %s with its tile: %v", kernel, err)
		}
	}
	for _, c := range []struct {
		kernel, params, err string
	}{
		{"wait_signal", "sig:ptr value:u64", ""},
		{"wait_signal", "sig:ptr value:u64 limit_ns:u64 mailbox:ptr", ""},
		{"pingpong", "dst:ptr src:ptr sig:ptr nbytes:i64 iters:i32 peer:i32 initiator:i32 stamps:ptr limit_ns:u64 mailbox:ptr", ""},
		{"wait_signal", "sig:ptr value:u64 limit_ns:u64", `parameter "limit_ns" (u64) is one symmem does not pass`},
		{"wait_signal", "sig:ptr value:u64 mailbox:ptr limit_ns:u64", `parameter "mailbox" (ptr) is one symmem does not pass`},
		{"put_block", "dst:ptr src:ptr nbytes:i64 chunk:i64 peer:i32 limit_ns:u64 mailbox:ptr", `parameter "limit_ns" (u64) is one symmem does not pass`},
		{"all_reduce_bf16", "send:ptr recv:ptr scratch:ptr nelem:i64 sig:ptr seq:i64 me:i32 n:i32", ""},
		{"all_reduce_f32", "send:ptr recv:ptr scratch:ptr nelem:i64 sig:ptr seq:i64 me:i32 n:i32 limit_ns:u64 mailbox:ptr", ""},
		{"all_reduce_bf16", "send:ptr recv:ptr scratch:ptr nbytes:i64 sig:ptr seq:i64 me:i32 n:i32", `parameter 4 is "nbytes" (i64), symmem passes "nelem" (i64) there`},
		{"all_reduce_bf16", "send:ptr recv:ptr scratch:ptr nelem:i64 sig:ptr seq:i32 me:i32 n:i32", `parameter 6 is "seq" (i32), symmem passes "seq" (i64) there`},
		// A matrix kernel's sidecar says its tile, which the grid is made of.
		{"all_gather_matmul_f16", agm, "is a matrix kernel whose metadata has no tile"},
		{"matmul_reduce_scatter_f16", mrs, "is a matrix kernel whose metadata has no tile"},
		// all-gather-matmul's parameters are not matmul-reduce-scatter's.
		{"matmul_reduce_scatter_bf16", agm, `parameter 4 is "m_local" (i32), symmem passes "scratch_ptr" (ptr) there`},
	} {
		a := &Artifact{Impl: "mine", Kernel: c.kernel, Params: p(c.params), Target: "sm_90a", NumWarps: 1}
		err := a.CheckSignature()
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s(%s): %v, want %q", c.kernel, c.params, err, c.err)
		}
	}
}

// UserOps lists every key a user's file can declare, once, but for the reduction
// operators' of the reducing ones: one of each other operator for each of those.
func TestUserOpsAreTheOpKernels(t *testing.T) {
	keys := UserOps()
	reducing := 0
	for _, key := range keys {
		if _, ok := OpKernels()[key]; !ok {
			t.Errorf("%s is not in OpKernels", key)
		}
		op, _, _ := strings.Cut(key, ":")
		if ops.Op(op).TakesRedOp() {
			reducing++
			for _, r := range ops.RedOps()[1:] {
				if k, ok := OpKernels()[key+":"+r.Name]; !ok || k != OpKernels()[key]+"_"+r.Name {
					t.Errorf("%s:%s is kernel %q", key, r.Name, k)
				}
			}
		}
	}
	if want := len(keys) + reducing*(len(ops.RedOps())-1); len(OpKernels()) != want || reducing != 4 {
		t.Errorf("%d keys, %d reducing; OpKernels has %d, want %d", len(keys), reducing, len(OpKernels()), want)
	}
}

// A kernel whose size is a tl.constexpr serves the sizes it was built for only; the
// refusal names them, the kernel and how to build the others. Kernels without Sizes,
// other implementations' and kernels not asked for are not refused.
func TestCheckSizes(t *testing.T) {
	c := &Catalog{Artifacts: []*Artifact{
		{Impl: "seed-put", Kernel: "put_block", Sizes: []int64{8, 1 << 20}, Wraps: "put_kernel: numel=nbytes (tl.constexpr: sizes 8,1048576)"},
		{Impl: "seed-put", Kernel: "get_block"},
		{Impl: "other", Kernel: "put_block", Sizes: []int64{16}},
	}}
	if err := c.CheckSizes("seed-put", []string{"put_block", "get_block"}, []int64{8, 1 << 20}); err != nil {
		t.Errorf("the sizes it was built for: %v", err)
	}
	if err := c.CheckSizes("seed-put", []string{"get_block"}, []int64{12}); err != nil {
		t.Errorf("a kernel without sizes: %v", err)
	}
	err := c.CheckSizes("seed-put", []string{"put_block"}, []int64{8, 4096, 4096, 1 << 28})
	want := "seed-put's put_block takes its size as a tl.constexpr and was built for 8,1048576 bytes only, not 4096,268435456: " +
		"rebuild with symmem kernels build FILE.py --sizes 8,1048576,4096,268435456 (put_kernel: numel=nbytes (tl.constexpr: sizes 8,1048576))"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	// The build script's sidecar fields (kernels/build-kernels.py, main_torch).
	var a Artifact
	if err := json.Unmarshal([]byte(`{"sizes": [8, 1048576], "wraps": "put_kernel: ...", "nvshmem_triton": "symmem's", "peers": "all", "per_peer": true, "ranks": [2, 3]}`), &a); err != nil ||
		!slices.Equal(a.Sizes, []int64{8, 1 << 20}) || a.Wraps != "put_kernel: ..." || a.NVSHMEMTriton != "symmem's" || a.Peers != PeersAll || !a.PerPeer || !slices.Equal(a.Ranks, []int{2, 3}) {
		t.Errorf("sidecar fields: %+v %v", a, err)
	}
}

// A kernel written for one block of a tl.constexpr size serves that many elements at
// most: more are refused, naming the kernel, its limit and the --const that builds a
// block that holds them (the next power of two) as the variant it makes. Its kernel of
// another element type, and kernels without a limit, are not asked.
func TestCheckElems(t *testing.T) {
	c := &Catalog{Artifacts: []*Artifact{
		{Impl: "st", Kernel: "get_add_f32", MaxElems: 1024, MaxElemsConst: "block_size", Wraps: "my_fused_get_add_kernel: out=dst (*fp32), ..."},
		{Impl: "st", Kernel: "get_add_bf16", MaxElems: 4096, MaxElemsConst: "block_size", Wraps: "my_fused_get_add_kernel: ..."},
		{Impl: "st[fn=other][nbi=1]", Kernel: "get_add_f32", MaxElems: 8, MaxElemsConst: "BLOCK", Wraps: "other: ..."},
		{Impl: "free", Kernel: "get_add_f32"},
	}}
	ks := []string{"get_add_f32", "get_add_bf16"}
	for _, tc := range []struct {
		impl, dtype string
		count       int64
		want        string
	}{
		{"st", "float32", 1024, ""},
		{"st", "bf16", 4096, ""},
		{"st", "bfloat16", 2000, ""},
		{"free", "float32", 1 << 30, ""},
		{"st", "float32", 1025, "st's get_add_f32 adds at most 1024 elements, one block of my_fused_get_add_kernel's tl.constexpr block_size, not 1025: " +
			"rebuild with symmem kernels build FILE.py --const block_size=2048 (a power of two) and run its variant st[block_size=2048]"},
		{"st", "bf16", 5000, "st's get_add_bf16 adds at most 4096 elements, one block of my_fused_get_add_kernel's tl.constexpr block_size, not 5000: " +
			"rebuild with symmem kernels build FILE.py --const block_size=8192 (a power of two) and run its variant st[block_size=8192]"},
		{"st[fn=other][nbi=1]", "float32", 9, "--const BLOCK=16 (a power of two) and run its variant st[fn=other][BLOCK=16][nbi=1]"},
	} {
		err := c.CheckElems(tc.impl, ks, tc.dtype, tc.count)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s, %d %s: %v, want %q", tc.impl, tc.count, tc.dtype, err, tc.want)
		}
	}
	if err := c.CheckElems("st", []string{"get_add_bf16"}, "float32", 1<<20); err != nil {
		t.Errorf("a kernel not asked for: %v", err)
	}
	// The build script's sidecar fields (kernels/build-kernels.py, main_torch).
	var a Artifact
	if err := json.Unmarshal([]byte(`{"max_elems": 1024, "max_elems_const": "block_size"}`), &a); err != nil || a.MaxElems != 1024 || a.MaxElemsConst != "block_size" {
		t.Errorf("sidecar fields: %+v %v", a, err)
	}
}

// A put whose kernel reaches every peer itself says so, and one whose world size is a
// tl.constexpr serves the job sizes it was built for only: the refusal names them, the
// kernel and how to build another. Kernels without Ranks, other implementations' and
// kernels not asked for are not refused.
func TestReachesAllAndCheckRanks(t *testing.T) {
	c := &Catalog{Artifacts: []*Artifact{
		{Impl: "st", Kernel: "put_block", Peers: PeersAll, Ranks: []int{2, 3, 4}, Wraps: "k: world_size=the job's ranks (tl.constexpr: 2 to 4 ranks)"},
		{Impl: "st", Kernel: "get_block"},
		{Impl: "other", Kernel: "put_block", Ranks: []int{5}},
	}}
	if !c.ReachesAll("st", "put_block") || c.ReachesAll("st", "get_block") || c.ReachesAll("other", "put_block") {
		t.Error("ReachesAll does not read peers")
	}
	for _, n := range []int{2, 4} {
		if err := c.CheckRanks("st", []string{"put_block", "get_block"}, n); err != nil {
			t.Errorf("%d ranks, a size it was built for: %v", n, err)
		}
	}
	if err := c.CheckRanks("st", []string{"get_block"}, 9); err != nil {
		t.Errorf("a kernel without ranks: %v", err)
	}
	err := c.CheckRanks("st", []string{"put_block"}, 9)
	want := "st's put_block takes the job's size as a tl.constexpr and was built for 2,3,4 ranks only, not 9: rebuild it for 9 with symmem kernels build FILE.py --const on its world size " +
		"(k: world_size=the job's ranks (tl.constexpr: 2 to 4 ranks))"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}
