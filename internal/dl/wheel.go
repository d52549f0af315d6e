package dl

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
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

// ExtraSites are site-packages directories to search before the prefixes' (check-nvshmem
// sets the ones python3 itself reports: SitePackagesOf).
var ExtraSites []string

// WheelLibs lists where a wheel's library may be: lib under nvidia/PKG in ExtraSites and
// in every prefix's site-packages that exists (the newest python3.N first), the user's
// own (pip install --user) among them.
func WheelLibs(pkg, lib string) []string {
	var sites []string
	sites = append(sites, ExtraSites...)
	prefixes := PythonPrefixes()
	if home, err := os.UserHomeDir(); err == nil {
		prefixes = append(prefixes, filepath.Join(home, ".local"))
	}
	for _, p := range prefixes {
		for _, sp := range []string{"lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages"} {
			matches, _ := filepath.Glob(filepath.Join(p, sp))
			sort.Sort(sort.Reverse(sort.StringSlice(matches)))
			sites = append(sites, matches...)
		}
	}
	var out []string
	for _, s := range sites {
		c := filepath.Join(s, "nvidia", pkg, "lib", lib)
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// SitePackagesOf asks the interpreter python where its packages are (site-packages,
// dist-packages and the user's), as pip installs into them; nil where it cannot say.
func SitePackagesOf(ctx context.Context, python string) []string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c",
		"import site\nfor p in site.getsitepackages() + [site.getusersitepackages()]: print(p)").Output()
	if err != nil {
		return nil
	}
	var dirs []string
	for _, d := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			dirs = append(dirs, d)
		}
	}
	return dirs
}
