// Package kernelstest writes users' kernel directories for tests: sidecars as symmem
// kernels build writes them, each beside an image that is no real kernel, so that
// the registry, the planner and the run's logic can be tested without a GPU or a
// build.
package kernelstest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/symmem/symmem/pkg/kernels"
)

// Dir writes, into a new directory, implementation impl's artifacts of the given
// kernels (of pkg/kernels' table: their parameters, one warp for the one-warp ones,
// else 4 and 32) for sm_90, and returns the directory.
func Dir(t testing.TB, impl string, ks ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, k := range ks {
		params := append(slices.Clone(kernels.Signatures()[k]), kernels.Param{Name: "global_scratch", Type: "ptr", Hidden: true},
			kernels.Param{Name: "profile_scratch", Type: "ptr", Hidden: true})
		warps := []int{4, 32}
		for _, uk := range kernels.UserKernels() {
			if uk.Kernel == k && uk.OneWarp {
				warps = []int{1}
			}
		}
		for _, w := range warps {
			stem := impl + "." + k + ".w" + strconv.Itoa(w) + ".sm90"
			image := []byte("fake cubin " + stem)
			sum := sha256.Sum256(image)
			js, err := json.Marshal(map[string]any{"impl": impl, "kernel": k, "entry": k, "file": stem + ".cubin", "format": "cubin",
				"target": "sm_90a", "arch": 90, "num_warps": w, "block_threads": 32 * w, "uses_nvshmem": true,
				"nvshmem_device_version": []int{3, 4, 5}, "sha256": hex.EncodeToString(sum[:]), "params": params})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, stem+".cubin"), image, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, stem+".cubin.json"), js, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}
