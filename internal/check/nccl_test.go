package check

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/nccl"
	"github.com/symmem/symmem/internal/setting"
)

const wheelNCCL = "/opt/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"

func TestNCCLCheck(t *testing.T) {
	found := func(string) nccl.Search {
		return nccl.Search{Tried: []nccl.Candidate{{Path: "/nccl/lib/libnccl.so.2", Source: nccl.SourceHome}, {Path: wheelNCCL, Source: nccl.SourceWheel}},
			Chosen: wheelNCCL, Source: nccl.SourceWheel}
	}
	loaderOnly := func(string) nccl.Search {
		return nccl.Search{Tried: []nccl.Candidate{{Path: "/usr/lib64/libnccl.so.2", Source: nccl.SourceSystem}, {Path: nccl.LibName, Source: nccl.SourceLoader}},
			Chosen: nccl.LibName, Source: nccl.SourceLoader}
	}
	version := func(loaded string, err error) func(string) (nccl.Version, string, error) {
		return func(string) (nccl.Version, string, error) {
			return nccl.Version{Major: 2, Minor: 27, Patch: 3}, loaded, err
		}
	}
	for _, tc := range []struct {
		name     string
		explicit string
		find     func(string) nccl.Search
		version  func(string) (nccl.Version, string, error)
		status   Status
		detail   string
		remedy   string
	}{
		{"wheel", "", found, version("", nil), OK,
			"found at " + wheelNCCL + " via nvidia-nccl wheel, version 2.27.3; serves impl nccl, nccl-symm (nccl-device needs 2.28)", ""},
		{"loader resolves the soname", "", loaderOnly, version("/usr/lib/x86_64-linux-gnu/libnccl.so.2", nil), OK,
			"found at /usr/lib/x86_64-linux-gnu/libnccl.so.2 via dynamic loader, version 2.27.3", ""},
		{"nowhere", "", loaderOnly, version("", errors.New("dlopen libnccl.so.2: cannot open shared object file")), Warning,
			"libnccl.so.2 not found: in none of the 1 places searched, nor on the dynamic loader's path: the nccl implementation cannot run",
			"pip install nvidia-nccl-cu13"},
		{"explicit missing", "/x/libnccl.so.2", func(string) nccl.Search {
			return nccl.Search{Tried: []nccl.Candidate{{Path: "/x/libnccl.so.2", Source: nccl.SourceExplicit}}}
		}, version("", nil), Warning, "/x/libnccl.so.2 (nccl-lib or SYMMEM_NCCL_LIB): no such file", "fix the path"},
		{"too old", "", found, version("", errors.New(wheelNCCL+" does not export ncclGetLastError: the library is too old or not the one expected")), Warning,
			"does not export ncclGetLastError", "NCCL_HOME, nccl-lib or SYMMEM_NCCL_LIB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{}
			var asked string
			find := func(e string) nccl.Search { asked = e; return tc.find(e) }
			r.ncclLib(Machine{FindNCCL: find, NCCLVersion: tc.version}, Options{NCCLLib: tc.explicit})
			if asked != tc.explicit {
				t.Errorf("FindNCCL(%q), want the explicit %q", asked, tc.explicit)
			}
			if len(r.Checks) != 1 {
				t.Fatalf("checks %+v", r.Checks)
			}
			c := r.Checks[0]
			if c.Area != "nccl" || c.Status != tc.status || !strings.Contains(c.Detail, tc.detail) || !strings.Contains(c.Remedy, tc.remedy) {
				t.Errorf("got %s %q (remedy %q)\nwant %s %q (remedy with %q)", c.Status, c.Detail, c.Remedy, tc.status, tc.detail, tc.remedy)
			}
			if r.Failed() {
				t.Error("a missing NCCL failed the report: the GPU backend runs without it")
			}
			b, _ := json.Marshal(r)
			var back struct {
				NCCL *NCCLReport `json:"nccl"`
			}
			json.Unmarshal(b, &back)
			if back.NCCL == nil || back.NCCL.Found != (tc.status == OK) || (tc.status == OK) != (back.NCCL.Version == "2.27.3") {
				t.Errorf("JSON: %s", b)
			}
		})
	}
	// Which of the three NCCL paths a release serves.
	for v, want := range map[nccl.Version]string{{Major: 2, Minor: 26, Patch: 5}: "nccl", {Major: 2, Minor: 27}: "nccl,nccl-symm",
		{Major: 2, Minor: 28, Patch: 9}: "nccl,nccl-symm,nccl-device", {Major: 3}: "nccl,nccl-symm,nccl-device"} {
		rep := &NCCLReport{}
		line := rep.serves(v, setting.Unworded)
		if got := strings.Join(rep.Serves, ","); got != want || len(rep.Cannot) != 3-len(rep.Serves) || !strings.Contains(line, "{impl} "+strings.ReplaceAll(want, ",", ", ")) {
			t.Errorf("NCCL %s serves %q (cannot %v, %q), want %q", v, got, rep.Cannot, line, want)
		}
	}
	// A machine that does not say how to find NCCL (the golden scenarios) skips the check.
	r := &Report{}
	r.ncclLib(Machine{}, Options{})
	if len(r.Checks) != 0 || r.NCCL != nil {
		t.Errorf("no FindNCCL: %+v", r)
	}
}

func TestNCCLNVLSWarning(t *testing.T) {
	for v, want := range map[string]bool{"1": true, "0": false} {
		r := &Report{}
		r.environment(Machine{Environ: []string{"NCCL_NVLS_ENABLE=" + v, "NVSHMEM_DISABLE_NVLS=1"}})
		got := false
		for _, c := range r.Checks {
			got = got || c.Name == "NCCL_NVLS_ENABLE" && c.Status == Warning
		}
		if got != want {
			t.Errorf("NCCL_NVLS_ENABLE=%s: warning %v, want %v (%+v)", v, got, want, r.Checks)
		}
	}
}
