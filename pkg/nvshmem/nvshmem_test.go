package nvshmem

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFindOrder(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	venv := filepath.Join(root, "venv")
	wheel := filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "nvshmem", "lib", LibName)
	touch(t, wheel)
	touch(t, filepath.Join(venv, "bin", "python3"))
	t.Setenv("PATH", filepath.Join(venv, "bin"))
	t.Setenv("VIRTUAL_ENV", "")
	t.Setenv("CONDA_PREFIX", "")
	t.Setenv("NVSHMEM_LIB_DIR", "")
	t.Setenv("NVSHMEM_HOME", home)

	// The wheel of the python3 on PATH is found when NVSHMEM_HOME has nothing.
	if s := Find(""); s.Chosen != wheel {
		t.Fatalf("Chosen = %q, want the wheel %q; tried %v", s.Chosen, wheel, s.Tried)
	}
	// NVSHMEM_HOME comes before the wheel.
	homeLib := filepath.Join(home, "lib", LibName)
	touch(t, homeLib)
	if s := Find(""); s.Chosen != homeLib {
		t.Fatalf("Chosen = %q, want NVSHMEM_HOME's %q", s.Chosen, homeLib)
	}
	// An explicit directory or file wins; a wrong one is not replaced by another library.
	if s := Find(filepath.Dir(wheel)); s.Chosen != wheel {
		t.Fatalf("explicit dir: Chosen = %q", s.Chosen)
	}
	if s := Find(filepath.Join(root, "nope.so")); s.Chosen != "" || len(s.Tried) != 1 {
		t.Fatalf("a missing explicit path chose %q (tried %v)", s.Chosen, s.Tried)
	}
	// The dynamic loader's own search comes last.
	c := Candidates("")
	if c[len(c)-1] != LibName || !strings.HasPrefix(c[0], home) {
		t.Errorf("candidate order: first %q, last %q", c[0], c[len(c)-1])
	}
}

func TestSymmetricSize(t *testing.T) {
	for _, tc := range []struct{ heap, want int64 }{
		{0, 160 << 20},
		{1, 162 << 20},
		{2 << 20, 162 << 20},
		{1 << 30, 1<<30 + 160<<20},
		{1<<30 + 1, 1<<30 + 162<<20},
	} {
		if got := SymmetricSize(tc.heap); got != tc.want {
			t.Errorf("SymmetricSize(%d) = %d, want %d", tc.heap, got, tc.want)
		}
	}
}

// An init that put two ranks on one GPU says so and what to do (seen on one H200 with
// two ranks started by hand: status 3); others point at NVSHMEM's own reason.
func TestStatusError(t *testing.T) {
	for st, want := range map[int32]string{3: "more than one rank on this GPU", 4: "more than one rank on this GPU", 1: "NVSHMEM_DEBUG=WARN"} {
		if err := statusError(st, false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("status %d: %v", st, err)
		}
	}
	// SYMMEM_TEST_MPG=1 lets ranks share a GPU, and nothing else through.
	for st, ok := range map[int32]bool{2: true, 3: true, 4: true, 1: false, 0: false} {
		if err := statusError(st, true); (err == nil) != ok {
			t.Errorf("status %d with %s=1: %v", st, EnvMPG, err)
		}
	}
}

// A refused init leaves nothing pinned: the Lib can be dropped and collected without
// the runtime's panic for a leaking Pinner (seen on one H200 when NVSHMEM refused two
// ranks on one GPU: "runtime.Pinner: found leaking pinned pointer").
func TestFailedInitUnpins(t *testing.T) {
	for _, st := range []int32{3, 0} {
		l := &Lib{
			setAttrUID:      func(int32, int32, *UID, *attr) int32 { return 0 },
			hostlibInitAttr: func(uint32, *attr) int32 { return 0 },
			initStatus:      func() int32 { return st },
		}
		if err := l.Init(0, 2, UID{}); err == nil {
			t.Fatalf("status %d: init succeeded", st)
		}
	}
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond) // the finalizers run on their own goroutine
}

// A search that fell through to the dynamic loader lists where it looked, but not the
// bare soname as if it were a place.
func TestSearchErrListsPlaces(t *testing.T) {
	if Loadable() {
		t.Skip("the dynamic loader finds NVSHMEM here")
	}
	err := Search{Tried: []string{"/opt/a/" + LibName, LibName}, Chosen: LibName}.Err()
	if err == nil || !strings.Contains(err.Error(), "Searched, in order:\n  /opt/a/"+LibName+"\n  (and the dynamic loader's path)") {
		t.Fatalf("err = %v", err)
	}
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("err does not wrap ErrNotFound: %v", err)
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{"3.4.5": {3, 4, 5}, "3.4": {3, 4, 0}, " 12.0.1\n": {12, 0, 1}} {
		if v, err := ParseVersion(in); err != nil || v != want {
			t.Errorf("ParseVersion(%q) = %v, %v", in, v, err)
		}
	}
	for _, in := range []string{"", "3", "3.4.5.6", "3.-1", "a.b"} {
		if _, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q) took it", in)
		}
	}
}
