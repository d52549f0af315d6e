package nccl

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/symmem/symmem/internal/dl"
	"github.com/symmem/symmem/internal/setting"
)

// LibName is NCCL's soname.
const LibName = "libnccl.so.2"

// Source is where a candidate path came from. SourceExplicit is the setting's key:
// whoever shows a search words it (setting.Words).
type Source string

// Sources, in the order Find tries them.
const (
	SourceExplicit Source = Source(setting.NCCLLib) // the setting (flag, SYMMEM_NCCL_LIB or config)
	SourceHome     Source = "NCCL_HOME"             // $NCCL_HOME/lib or lib64
	SourceWheel    Source = "nvidia-nccl wheel"     // site-packages/nvidia/nccl/lib, beside PyTorch
	SourceSystem   Source = "system path"           // /usr/lib/x86_64-linux-gnu and friends
	SourceLoader   Source = "dynamic loader"        // the bare soname: LD_LIBRARY_PATH, ld.so.cache
)

// Candidate is one place to look.
type Candidate struct {
	Path   string `json:"path"`
	Source Source `json:"source"`
}

// Search is where Find looked, in order, and what it chose ("" when nothing).
type Search struct {
	Tried  []Candidate `json:"tried"`
	Chosen string      `json:"chosen,omitempty"`
	Source Source      `json:"source,omitempty"`
}

// InstallHint says how to get NCCL where symmem looks for it.
var InstallHint = setting.Textf("install it with `pip install nvidia-nccl-cu13` (or -cu12) into the Python environment beside PyTorch, or point symmem at an NCCL build with NCCL_HOME, %s or SYMMEM_NCCL_LIB", setting.NCCLLib)

// wheelPattern marks a wheel candidate whose python3.N directory did not exist: it is
// listed so the search shows where a wheel would be found, and never stat'ed.
const wheelPattern = "python3.X"

// systemDirs hold distribution packages of NCCL (libnccl2 on Debian/Ubuntu, the CUDA
// repositories' RPMs) and CUDA toolkits that bundle it.
var systemDirs = []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/sbsa-linux-gnu", "/usr/lib64",
	"/usr/local/lib", "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda/targets/sbsa-linux/lib"}

// Candidates lists the places to look, most specific first (see the package
// documentation for the order).
func Candidates(explicit string) []Candidate {
	var c []Candidate
	add := func(p string, s Source) {
		for _, q := range c {
			if q.Path == p {
				return
			}
		}
		c = append(c, Candidate{Path: p, Source: s})
	}
	if explicit != "" {
		if st, err := os.Stat(explicit); err == nil && st.IsDir() {
			explicit = filepath.Join(explicit, LibName)
		}
		add(explicit, SourceExplicit)
	}
	if h := os.Getenv("NCCL_HOME"); h != "" {
		add(filepath.Join(h, "lib", LibName), SourceHome)
		add(filepath.Join(h, "lib64", LibName), SourceHome)
	}
	for _, m := range dl.WheelLibs("nccl", LibName) {
		add(m, SourceWheel)
	}
	for _, d := range systemDirs {
		add(filepath.Join(d, LibName), SourceSystem)
	}
	add(LibName, SourceLoader)
	return c
}

// Find returns the first candidate that exists; the bare soname is left to dlopen
// (Open, then Lib.Path says where the loader found it). An explicit path is the only
// candidate: a wrong one is an error, not a reason to load some other NCCL.
func Find(explicit string) Search {
	s := Search{}
	cands := Candidates(explicit)
	if explicit != "" {
		cands = cands[:1]
	}
	for _, c := range cands {
		s.Tried = append(s.Tried, c)
		if strings.Contains(c.Path, wheelPattern) {
			continue
		}
		if c.Source == SourceLoader {
			s.Chosen, s.Source = c.Path, c.Source
			return s
		}
		if _, err := os.Stat(c.Path); err == nil {
			s.Chosen, s.Source = c.Path, c.Source
			return s
		}
	}
	return s
}
