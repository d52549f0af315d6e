package cublas

import (
	"os"
	"path/filepath"
	"testing"
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
	home := filepath.Join(root, "cuda")
	venv := filepath.Join(root, "venv")
	site := filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia")
	touch(t, filepath.Join(venv, "bin", "python3"))
	t.Setenv("PATH", filepath.Join(venv, "bin"))
	t.Setenv("VIRTUAL_ENV", "")
	t.Setenv("CONDA_PREFIX", "")
	t.Setenv("CUDA_HOME", home)

	// CUDA 12's wheel when it is the only one; CUDA 13's before it.
	old := filepath.Join(site, "cublas", "lib", "libcublasLt.so.12")
	touch(t, old)
	if s := Find(""); s.Chosen != old || s.Source != SourceWheel {
		t.Fatalf("Chosen %q via %q, want CUDA 12's wheel %q", s.Chosen, s.Source, old)
	}
	wheel := filepath.Join(site, "cu13", "lib", "libcublasLt.so.13")
	touch(t, wheel)
	if s := Find(""); s.Chosen != wheel || s.Source != SourceWheel {
		t.Fatalf("Chosen %q via %q, want CUDA 13's wheel %q; tried %v", s.Chosen, s.Source, wheel, s.Tried)
	}
	// CUDA_HOME before the wheel.
	homeLib := filepath.Join(home, "lib64", "libcublasLt.so.13")
	touch(t, homeLib)
	if s := Find(""); s.Chosen != homeLib || s.Source != SourceHome {
		t.Fatalf("Chosen %q via %q, want CUDA_HOME's %q", s.Chosen, s.Source, homeLib)
	}
	// An explicit directory or file wins; a wrong one is not replaced by another cuBLAS.
	if s := Find(filepath.Dir(wheel)); s.Chosen != wheel || s.Source != SourceExplicit {
		t.Fatalf("explicit dir: Chosen %q via %q", s.Chosen, s.Source)
	}
	if s := Find(filepath.Join(root, "nope.so")); s.Chosen != "" || len(s.Tried) != 1 || s.Tried[0].Source != SourceExplicit {
		t.Fatalf("a missing explicit path chose %q (tried %v)", s.Chosen, s.Tried)
	}
	// The dynamic loader's own search comes last, newest soname first.
	c := Candidates("")
	if n := len(c); c[n-2].Path != LibNames[0] || c[n-1].Path != LibNames[1] || c[n-1].Source != SourceLoader {
		t.Errorf("last candidates %v", c[n-2:])
	}
}
