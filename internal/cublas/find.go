package cublas

import (
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/symmem/symmem/internal/dl"
)

// LibNames are cuBLASLt's sonames, newest first: CUDA 13's, then CUDA 12's.
var LibNames = []string{"libcublasLt.so.13", "libcublasLt.so.12"}

// EnvLib names an explicit libcublasLt (a file, or a directory holding one).
const EnvLib = "SYMMEM_CUBLAS_LIB"

// Source is where a candidate path came from.
type Source string

// Sources, in the order Find tries them.
const (
	SourceExplicit Source = EnvLib                // SYMMEM_CUBLAS_LIB
	SourceHome     Source = "CUDA_HOME"           // $CUDA_HOME/lib64 or lib
	SourceWheel    Source = "nvidia-cublas wheel" // site-packages/nvidia/cu13/lib (or cublas/lib), beside PyTorch
	SourceToolkit  Source = "CUDA toolkit"        // /usr/local/cuda*/lib64
	SourceLoader   Source = "dynamic loader"      // the bare soname: LD_LIBRARY_PATH, ld.so.cache
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

// InstallHint says how to get cuBLASLt where symmem looks for it.
const InstallHint = "install it with `pip install nvidia-cublas` (CUDA 13; nvidia-cublas-cu12 for CUDA 12) into the Python environment beside PyTorch, or a CUDA toolkit, or point symmem at a libcublasLt.so.13 with " + EnvLib

// toolkitDirs are where CUDA toolkits put their libraries, newest release first.
func toolkitDirs() []string {
	dirs := []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda/targets/sbsa-linux/lib"}
	for _, pat := range []string{"/usr/local/cuda-13*/lib64", "/usr/local/cuda-12*/lib64"} {
		m, _ := filepath.Glob(pat)
		sort.Sort(sort.Reverse(sort.StringSlice(m)))
		dirs = append(dirs, m...)
	}
	return append(dirs, "/usr/lib/x86_64-linux-gnu", "/usr/lib64")
}

// Candidates lists the places to look, most specific first (see the package
// documentation for the order).
func Candidates(explicit string) []Candidate {
	var c []Candidate
	add := func(p string, s Source) {
		if !slices.ContainsFunc(c, func(q Candidate) bool { return q.Path == p }) {
			c = append(c, Candidate{Path: p, Source: s})
		}
	}
	if explicit != "" {
		if st, err := os.Stat(explicit); err == nil && st.IsDir() {
			for _, n := range LibNames {
				add(filepath.Join(explicit, n), SourceExplicit)
			}
		} else {
			add(explicit, SourceExplicit)
		}
	}
	for _, name := range LibNames {
		if h := os.Getenv("CUDA_HOME"); h != "" {
			add(filepath.Join(h, "lib64", name), SourceHome)
			add(filepath.Join(h, "lib", name), SourceHome)
		}
	}
	for _, name := range LibNames {
		pkg := "cu13"
		if name != LibNames[0] {
			pkg = "cublas"
		}
		for _, m := range dl.WheelLibs(pkg, name) {
			add(m, SourceWheel)
		}
	}
	for _, name := range LibNames {
		for _, d := range toolkitDirs() {
			add(filepath.Join(d, name), SourceToolkit)
		}
	}
	for _, name := range LibNames {
		add(name, SourceLoader)
	}
	return c
}

// Find returns the first candidate that exists; the bare sonames are left to dlopen
// (Open, then Lib.Path says where the loader found it), the newest first. An explicit
// path is the only place looked: a wrong one is an error, not a reason to load some
// other cuBLAS.
func Find(explicit string) Search {
	s := Search{}
	cands := Candidates(explicit)
	if explicit != "" {
		cands = slices.DeleteFunc(cands, func(c Candidate) bool { return c.Source != SourceExplicit })
	}
	for _, c := range cands {
		s.Tried = append(s.Tried, c)
		if c.Source == SourceLoader {
			if dl.MappedPath(c.Path) != "" || loadable(c.Path) {
				s.Chosen, s.Source = c.Path, c.Source
				return s
			}
			continue
		}
		if st, err := os.Stat(c.Path); err == nil && !st.IsDir() {
			s.Chosen, s.Source = c.Path, c.Source
			return s
		}
	}
	return s
}

// loadable says whether the dynamic loader finds soname: it is opened (and kept open:
// the caller opens it next).
func loadable(soname string) bool {
	_, err := dl.Open(soname)
	return err == nil
}
