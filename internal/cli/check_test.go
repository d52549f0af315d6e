package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/check"
	"github.com/symmem/symmem/internal/cuda"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/topo"
	"github.com/symmem/symmem/internal/topo/topotest"
	"github.com/symmem/symmem/pkg/kernels"
	"github.com/symmem/symmem/pkg/nvshmem"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fakeDriver plays the CUDA driver.
type fakeDriver struct {
	version int
	devs    []cuda.DeviceInfo
	noP2P   bool
}

func (f fakeDriver) Version() (int, error)     { return f.version, nil }
func (f fakeDriver) DeviceCount() (int, error) { return len(f.devs), nil }
func (f fakeDriver) Device(i int) (cuda.DeviceInfo, error) {
	return f.devs[i], nil
}
func (f fakeDriver) CanAccessPeer(a, b int) (bool, error) { return !f.noP2P, nil }

func h200s(n, cc int) []cuda.DeviceInfo {
	var ds []cuda.DeviceInfo
	for i := 0; i < n; i++ {
		ds = append(ds, cuda.DeviceInfo{Ordinal: i, Name: "NVIDIA H200", CC: cc, SMs: 132, MemBytes: 150109880320,
			PCIBusID: fmt.Sprintf("00000000:%02x:00.0", 0x18+i)})
	}
	return ds
}

// noNVML is a machine whose libnvidia-ml is missing.
func noNVML() topo.NVML {
	return &topotest.Machine{InitErr: &topo.Error{Code: topo.ErrorLibraryNotFound, Text: "ERROR_LIBRARY_NOT_FOUND"}}
}

const wheel = "/opt/venv/lib/python3.12/site-packages/nvidia/nvshmem/lib/libnvshmem_host.so.3"

func foundLib(string) nvshmem.Search {
	return nvshmem.Search{Tried: []string{"/usr/local/nvshmem/lib/libnvshmem_host.so.3", wheel}, Chosen: wheel}
}

func lib(v [3]int) func(string) ([3]int, error) {
	return func(string) ([3]int, error) { return v, nil }
}

var env = []string{"NVSHMEM_DISABLE_NVLS=1", "CUDA_VISIBLE_DEVICES=0,1", "HOME=/root", "NVSHMEM_FOO=1"}

func scenarios() map[string]check.Machine {
	exists := func(p string) bool { return strings.HasSuffix(p, ".bc") }
	base := func() check.Machine {
		return check.Machine{FindLib: foundLib, LibVersion: lib([3]int{3, 4, 5}), Catalog: kernels.Default(), Environ: env, Exists: exists}
	}
	sc := map[string]check.Machine{}

	m := base()
	m.OpenDriver = func() (check.Driver, error) {
		return nil, errors.New("NVIDIA driver not found (dlopen libcuda.so.1: cannot open shared object file)")
	}
	m.NVML = noNVML()
	sc["no-driver"] = m

	m = base()
	m.OpenDriver = func() (check.Driver, error) { return fakeDriver{version: 13000}, nil }
	m.NVML = &topotest.Machine{Driver: "580.159.04", CUDA: 13000}
	sc["no-gpu"] = m

	m = base()
	m.OpenDriver = func() (check.Driver, error) { return fakeDriver{version: 13000, devs: h200s(1, 90)}, nil }
	m.NVML = topotest.H200s(1, false)
	sc["one-gpu"] = m

	m = base()
	m.OpenDriver = func() (check.Driver, error) { return fakeDriver{version: 13000, devs: h200s(8, 90)}, nil }
	m.NVML = topotest.H200s(8, true)
	sc["h200x8-nvlink"] = m

	m = base()
	m.OpenDriver = func() (check.Driver, error) { return fakeDriver{version: 12040, devs: h200s(2, 90), noP2P: true}, nil }
	m.NVML = topotest.H200s(2, false)
	sc["pcie-only"] = m

	m = base()
	m.OpenDriver = func() (check.Driver, error) { return fakeDriver{version: 13000, devs: h200s(2, 90)}, nil }
	m.NVML = topotest.H200s(2, true)
	m.FindLib = func(string) nvshmem.Search {
		return nvshmem.Search{Tried: []string{"/usr/local/nvshmem/lib/libnvshmem_host.so.3", nvshmem.LibName}, Chosen: nvshmem.LibName}
	}
	m.LibVersion = func(string) ([3]int, error) { return [3]int{}, errors.New("dlopen: not found") }
	sc["nvshmem-missing"] = m

	m = base()
	m.OpenDriver = func() (check.Driver, error) { return fakeDriver{version: 13000, devs: h200s(2, 90)}, nil }
	m.NVML = topotest.H200s(2, true)
	m.LibVersion = lib([3]int{3, 3, 9})
	sc["host-older-than-kernels"] = m

	m = base()
	m.OpenDriver = func() (check.Driver, error) { return fakeDriver{version: 13000, devs: h200s(2, 75)}, nil }
	m.NVML = topotest.H200s(2, true)
	sc["no-kernel-for-arch"] = m

	m = base()
	m.OpenDriver = func() (check.Driver, error) { return fakeDriver{version: 13000, devs: h200s(2, 120)}, nil }
	m.NVML = topotest.H200s(2, true)
	sc["ptx-fallback"] = m
	return sc
}

func TestCheckScenarios(t *testing.T) {
	wantOK := map[string]bool{"h200x8-nvlink": true, "pcie-only": true, "ptx-fallback": true}
	for name, m := range scenarios() {
		t.Run(name, func(t *testing.T) {
			machine = func() check.Machine { return m }
			defer func() { machine = check.Real }()
			for _, asJSON := range []bool{false, true} {
				var out bytes.Buffer
				err := runCheck(context.Background(), &CheckOptions{JSON: asJSON, NProc: 2}, IO{Out: &out, Err: &out, Backends: binaryBackends})
				got := exitcode.OK
				if err != nil {
					got = symmem.ExitCode(err)
				}
				if wantOK[name] && got != exitcode.OK || !wantOK[name] && got != exitcode.NoGPUBackend {
					t.Errorf("exit code %d (err %v)", got, err)
				}
				ext := ".txt"
				if asJSON {
					ext = ".json"
				}
				golden(t, filepath.Join("testdata", "check", name+ext), out.Bytes())
			}
		})
	}
}

// A rank of an external launcher's job checks for the GPUs of the ranks the launcher put
// on its host, not --nproc's default 2: one rank a host on hosts of one GPU is ready (it
// was "1 GPU(s), and a run of 2 ranks needs one GPU per rank"); two ranks a host that
// each see one GPU are taken as bound to one each; four on a host of two are not.
func TestCheckUnderExternalLauncher(t *testing.T) {
	sc := scenarios()
	for _, tc := range []struct {
		machine string
		local   int
		nproc   int // --nproc given (0: not)
		ok      bool
		want    string
	}{
		{"one-gpu", 1, 0, true, ""},
		{"one-gpu", 2, 0, true, "this rank sees one GPU of the 2 ranks torchrun put on this host"},
		{"pcie-only", 4, 0, false, "2 GPU(s), and the 4 ranks torchrun put on this host need one GPU each"},
		{"one-gpu", 1, 2, false, "1 GPU(s), and a run of 2 ranks needs one GPU per rank"},
		// Without the secret a job over several hosts needs, the host's ranks still
		// count, and the missing secret is the failure.
		{"one-gpu", 1, -1, false, "a job over several hosts needs a secret"},
	} {
		token := "0123456789abcdef0123456789abcdef"
		if tc.nproc < 0 {
			token = ""
		}
		for k, v := range map[string]string{"RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": fmt.Sprint(tc.local),
			"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "t", "SYMMEM_STORE_TOKEN": token} {
			t.Setenv(k, v)
		}
		m := sc[tc.machine]
		machine = func() check.Machine { return m }
		var out bytes.Buffer
		opts := &CheckOptions{NProc: 2, JSON: true} // JSON: the details unwrapped
		if tc.nproc > 0 {
			opts.NProc, opts.nprocSet = tc.nproc, true
		}
		err := runCheck(context.Background(), opts, IO{Out: &out, Err: &out})
		machine = check.Real
		if tc.nproc < 0 && strings.Contains(out.String(), "a run of 2 ranks") {
			t.Errorf("without a secret: checked --nproc's default 2:\n%s", out.String())
		}
		if (err == nil) != tc.ok {
			t.Errorf("%+v: %v\n%s", tc, err, out.String())
		}
		if tc.want != "" && !strings.Contains(out.String(), tc.want) {
			t.Errorf("%+v: the report does not say %q:\n%s", tc, tc.want, out.String())
		}
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli -run TestCheck -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output:\n%s", path, got)
	}
}

func TestWrapBreaksAWordLongerThanTheWidth(t *testing.T) {
	path := "/root/.pyenv/versions/3.11.7/bin/python3;"
	got := wrap("not installed for "+path+" build elsewhere", 20)
	for _, l := range strings.Split(got, "\n") {
		if len([]rune(l)) > 20 {
			t.Errorf("line %q is wider than 20:\n%s", l, got)
		}
	}
	if !strings.Contains(strings.ReplaceAll(got, "\n", ""), path) {
		t.Errorf("the path is not all there, in order:\n%s", got)
	}
}
