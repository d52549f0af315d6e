package dl

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// PythonPrefixes are the Python environments whose site-packages may hold NVIDIA's
// wheels (nvidia-nvshmem, nvidia-nccl), in search order: the active virtual or conda
// environment, the environment of every python3 on PATH, then common locations.
func PythonPrefixes() []string {
	var prefixes []string
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := os.Getenv(v); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		for _, py := range []string{"python3", "python"} {
			if _, err := os.Stat(filepath.Join(dir, py)); err == nil {
				prefixes = append(prefixes, filepath.Dir(dir))
			}
		}
	}
	home, _ := os.UserHomeDir()
	prefixes = append(prefixes, filepath.Join(home, ".venv"), "/opt/venv", "/usr/local", "/usr")
	globbed, _ := filepath.Glob("/opt/*/.venv")
	return append(prefixes, globbed...)
}

// WheelLibs lists where a wheel's library may be: lib under nvidia/PKG in every
// prefix's site-packages (the newest python3.N first). Where a prefix has none, the
// path is still listed, with python3.X for the version, so that a search that fails can
// say where it looked.
func WheelLibs(pkg, lib string) []string {
	var out []string
	for _, p := range PythonPrefixes() {
		for _, sp := range []string{"lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages"} {
			matches, _ := filepath.Glob(filepath.Join(p, sp, "nvidia", pkg, "lib", lib))
			sort.Sort(sort.Reverse(sort.StringSlice(matches)))
			out = append(out, matches...)
			if len(matches) == 0 {
				out = append(out, filepath.Join(p, strings.Replace(sp, "python3*", "python3.X", 1), "nvidia", pkg, "lib", lib))
			}
		}
	}
	return out
}
