package nccl

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
	home := filepath.Join(root, "home")
	venv := filepath.Join(root, "venv")
	wheel := filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "nccl", "lib", LibName)
	touch(t, wheel)
	touch(t, filepath.Join(venv, "bin", "python3"))
	t.Setenv("PATH", filepath.Join(venv, "bin"))
	t.Setenv("VIRTUAL_ENV", "")
	t.Setenv("CONDA_PREFIX", "")
	t.Setenv("NCCL_HOME", home)

	// The wheel beside the python3 on PATH, when NCCL_HOME has nothing.
	if s := Find(""); s.Chosen != wheel || s.Source != SourceWheel {
		t.Fatalf("Chosen %q via %q, want the wheel %q; tried %v", s.Chosen, s.Source, wheel, s.Tried)
	}
	// NCCL_HOME before the wheel.
	homeLib := filepath.Join(home, "lib64", LibName)
	touch(t, homeLib)
	if s := Find(""); s.Chosen != homeLib || s.Source != SourceHome {
		t.Fatalf("Chosen %q via %q, want NCCL_HOME's %q", s.Chosen, s.Source, homeLib)
	}
	// An explicit directory or file wins; a wrong one is not replaced by another NCCL.
	if s := Find(filepath.Dir(wheel)); s.Chosen != wheel || s.Source != SourceExplicit {
		t.Fatalf("explicit dir: Chosen %q via %q", s.Chosen, s.Source)
	}
	if s := Find(filepath.Join(root, "nope.so")); s.Chosen != "" || len(s.Tried) != 1 || s.Tried[0].Source != SourceExplicit {
		t.Fatalf("a missing explicit path chose %q (tried %v)", s.Chosen, s.Tried)
	}
	// Nothing found: the dynamic loader's own search, last.
	t.Setenv("NCCL_HOME", "")
	t.Setenv("PATH", "")
	c := Candidates("")
	if last := c[len(c)-1]; last.Path != LibName || last.Source != SourceLoader {
		t.Errorf("last candidate %v", last)
	}
	for _, cand := range c[:len(c)-1] {
		if cand.Source == SourceHome {
			t.Errorf("NCCL_HOME unset, yet %v", cand)
		}
	}
}
