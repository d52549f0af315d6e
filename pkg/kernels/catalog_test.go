package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// hashSourceFiles mirrors kernels/build-kernels.py's sources_hash.
func hashSourceFiles(t *testing.T, dir string, names []string) string {
	h := sha256.New()
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	for _, n := range sorted {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Every embedded artifact matches its metadata's hash, and was built from the sources
// in kernels/ as they are now: a source edited without a rebuild fails here.
func TestArtifactsMatchMetadataAndSources(t *testing.T) {
	c := Default()
	if len(c.Artifacts) == 0 {
		t.Fatal("no kernels embedded")
	}
	for _, a := range c.Artifacts {
		if err := a.Verify(); err != nil {
			t.Error(err)
		}
		dir := filepath.Join("..", "..", "kernels", "triton")
		if a.Impl != "triton" {
			dir = filepath.Join("..", "..", "kernels", "cuda")
		}
		if got := hashSourceFiles(t, dir, a.Sources); got != a.SourceSHA256 {
			t.Errorf("%s was built from other sources than %v in %s: rebuild with scripts/build-kernels.sh", a.Name(), a.Sources, dir)
		}
		if a.Entry == "" || len(a.Params) == 0 {
			t.Errorf("%s: metadata has no entry or parameters", a.Name())
		}
	}
}

func TestSelect(t *testing.T) {
	c := Default()
	for _, tc := range []struct {
		cc     int
		format string
		target string
	}{{90, "cubin", "sm_90a"}, {80, "cubin", "sm_80"}, {86, "cubin", "sm_80"}, {100, "cubin", "sm_100a"}, {120, "ptx", "compute_80"}} {
		a, err := c.Select("triton", "put_block", 32, tc.cc)
		if err != nil {
			t.Fatalf("cc %d: %v", tc.cc, err)
		}
		if a.Format != tc.format || a.Target != tc.target {
			t.Errorf("cc %d: got %s %s, want %s %s", tc.cc, a.Format, a.Target, tc.format, tc.target)
		}
	}
	if _, err := c.Select("triton", "put_block", 32, 75); err == nil || !strings.Contains(err.Error(), "rebuild") {
		t.Errorf("sm_75 should have no kernel and say how to rebuild: %v", err)
	}
	// Every kernel of symmem's CUDA sources has compute_80 PTX for a GPU newer than its
	// cubins; where it calls NVSHMEM, linked with the device archive at load.
	for _, impl := range []string{"cuda", "nvshmem", "sm-store"} {
		for _, k := range c.Kernels(impl) {
			a, err := c.Select(impl, k, 0, 120)
			if err != nil {
				t.Errorf("%s/%s on sm_120: %v", impl, k, err)
				continue
			}
			link := []string(nil)
			if a.UsesNVSHMEM {
				link = []string{DeviceArchive}
			}
			if a.Format != "ptx" || a.Target != "compute_80" || !slices.Equal(a.Link, link) {
				t.Errorf("%s/%s on sm_120: %s %s linked with %v, want compute_80 PTX linked with %v", impl, k, a.Format, a.Target, a.Link, link)
			}
			if p, err := c.SelectPTX(impl, k, 0, 90); err != nil || p.Format != "ptx" {
				t.Errorf("%s/%s, PTX first on sm_90: %v %v", impl, k, p, err)
			}
			if b, err := c.Select(impl, k, 0, 90); err != nil || b.Format != "cubin" {
				t.Errorf("%s/%s on sm_90: %v %v, want the cubin", impl, k, b, err)
			}
		}
	}
	// PTX only, where a kernel has none (nccl-device): the error says so and names
	// that kernel's targets; an unbuilt warp count is still a *WarpsError.
	if _, err := c.SelectPTX("nccl-device", "put_block", 0, 90); !errors.Is(err, ErrNoPTX) ||
		!strings.Contains(err.Error(), "has sm_100a, sm_80, sm_90a, and none is PTX for sm_90") {
		t.Errorf("nccl-device, PTX only: %v", err)
	}
	var we *WarpsError
	if _, err := c.SelectPTX("triton", "put_block", 2, 90); !errors.As(err, &we) {
		t.Errorf("2 warps, PTX only: %v", err)
	}
	if _, err := c.Select("cuda", "put_block", 0, 75); err == nil {
		t.Error("the CUDA kernels' oldest target is sm_80; sm_75 must be refused")
	}
	if _, err := c.Select("triton", "put_block", 7, 90); err == nil || !strings.Contains(err.Error(), "warps") {
		t.Errorf("7 warps: %v", err)
	}
}

func TestCheckHostAndArgs(t *testing.T) {
	a, err := Default().Select("triton", "put_block", 4, 90)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CheckHost([3]int{3, 4, 5}); err != nil {
		t.Error(err)
	}
	if err := a.CheckHost([3]int{3, 3, 0}); err == nil || !strings.Contains(err.Error(), "cannot serve") {
		t.Errorf("an older host library was accepted: %v", err)
	}
	if err := a.CheckHost([3]int{4, 0, 0}); err == nil {
		t.Error("another major version was accepted")
	}
	args, err := a.Args(1, 2, 3, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	// dst, src, nbytes, chunk, peer (an i32: the driver reads the low half of its
	// slot), then two hidden scratch pointers, null.
	want := []uint64{1, 2, 3, 4, 5, 0, 0}
	if !slices.Equal(args, want) {
		t.Errorf("args %v, want %v", args, want)
	}
	if a.Params[4].Name != "peer" || a.Params[4].Type != "i32" || !a.Params[5].Hidden || !a.Params[6].Hidden {
		t.Errorf("put_block's parameters changed: %+v", a.Params)
	}
	if _, err := a.Args(1, 2); err == nil {
		t.Error("wrong argument count accepted")
	}
}

// The Triton kernels that sum move 16-byte vectors: ld/st.global.v4 in their PTX. A
// build where Triton could not prove the addresses 16-byte aligned compiles the same
// loops to 2- or 4-byte scalar accesses, which still give the right sums but put a
// header on every 64 bytes that cross NVLink and take several times the instructions
// (seen: every sum kernel was scalar until the alignment hint moved onto the pointer).
func TestSumKernelsMoveVectors(t *testing.T) {
	c := Default()
	sums := []string{"reduce_bf16", "reduce_f32", "reduce_staged_bf16", "reduce_push_bf16", "reduce_push_f32",
		"combine_bf16", "combine_f32", "combine_staged_bf16", "combine_staged_f32"}
	seen := map[string]bool{}
	for _, a := range c.Artifacts {
		if a.Impl != "triton" || a.Format != "ptx" || !slices.Contains(sums, a.Kernel) {
			continue
		}
		b, err := a.Data()
		if err != nil {
			t.Fatal(err)
		}
		ptx := string(b)
		for _, want := range []string{"ld.global.v4.", "st.global.v4."} {
			if !strings.Contains(ptx, want) {
				t.Errorf("%s: no %s in its PTX: the sums move scalars (%d ld.global.b16, %d ld.global.b32)",
					a.Name(), want, strings.Count(ptx, "ld.global.b16"), strings.Count(ptx, "ld.global.b32"))
			}
		}
		seen[a.Kernel] = true
	}
	for _, k := range sums {
		if !seen[k] {
			t.Errorf("no PTX of %s embedded to check", k)
		}
	}
}

// The LL128 all-reduce relies on each 128-byte line (15 data words and a flag) moving
// in one warp instruction, 8 threads of 16 bytes: its loads of the lines that peers
// store are all ld.volatile.global.v2.b64 and its stores into the peers' areas
// st.global.v2.b64. A build that loaded a line in 8-byte pieces could read a flag from
// one instruction and stale data from another: wrong sums now and then, not always.
func TestLL128MovesWholeLines(t *testing.T) {
	c := Default()
	seen := map[string]bool{}
	for _, a := range c.Artifacts {
		if a.Impl != "triton" || a.Format != "ptx" || !strings.HasPrefix(a.Kernel, "reduce_ll128_") {
			continue
		}
		b, err := a.Data()
		if err != nil {
			t.Fatal(err)
		}
		ptx := string(b)
		vec, all := strings.Count(ptx, "ld.volatile.global.v2.b64"), strings.Count(ptx, "ld.volatile.global.")
		if vec == 0 || vec != all {
			t.Errorf("%s: %d of its %d volatile loads are 16-byte vectors: a line's flag and data may come from different loads", a.Name(), vec, all)
		}
		if !strings.Contains(ptx, "st.global.v2.b64") {
			t.Errorf("%s: no st.global.v2.b64 in its PTX: its lines leave in pieces", a.Name())
		}
		seen[a.Kernel] = true
	}
	for _, k := range []string{"reduce_ll128_bf16", "reduce_ll128_f32"} {
		if !seen[k] {
			t.Errorf("no PTX of %s embedded to check", k)
		}
	}
}
