package nvshmem

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Version is an NVSHMEM library version: major, minor, patch.
type Version [3]int

// ParseVersion reads "3.4.5" (or "3.4", patch 0), as NVSHMEM's packages and
// nvshmem_device.h's NVSHMEM_VENDOR_* name a release.
func ParseVersion(s string) (Version, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("NVSHMEM version %q: want MAJOR.MINOR[.PATCH], such as 3.4.5", s)
	}
	var v Version
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return Version{}, fmt.Errorf("NVSHMEM version %q: %q is not a number; want MAJOR.MINOR[.PATCH], such as 3.4.5", s, p)
		}
		v[i] = n
	}
	return v, nil
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// Serves reports whether a host library of version v can serve kernels built against
// device library d: nvshmemx_cumodule_init needs the same major and a device minor no
// newer than the host's.
func (v Version) Serves(d Version) bool { return d[0] == v[0] && d[1] <= v[1] }

// ErrNotFound is wrapped by Search.Err when no host library was found.
var ErrNotFound = errors.New("NVSHMEM host library " + LibName + " not found")

// Err is nil when the search found a library, and otherwise says where it looked and
// how to install NVSHMEM; it wraps ErrNotFound (and fs.ErrNotExist for an explicit
// path that is not there). Where the search fell through to the bare soname, Err asks
// the dynamic loader whether it finds the library (Loadable).
func (s Search) Err() error {
	switch {
	case s.Chosen != "" && (s.Chosen != LibName || Loadable()):
		return nil
	case s.Chosen == "" && len(s.Tried) == 1:
		return fmt.Errorf("%w: %s: %w", ErrNotFound, s.Tried[0], os.ErrNotExist)
	}
	dirs := s.Tried
	if len(dirs) > 0 && dirs[len(dirs)-1] == LibName {
		dirs = dirs[:len(dirs)-1]
	}
	return fmt.Errorf("%w; %s. Searched, in order:\n  %s\n  (and the dynamic loader's path)", ErrNotFound, InstallHint, strings.Join(dirs, "\n  "))
}
