package check

import (
	"fmt"
	"strings"

	"github.com/symmem/symmem/internal/nccl"
)

// NCCLReport is what check-nvshmem found of NCCL, which the nccl implementation of the
// collectives needs (NVSHMEM's implementations do not).
type NCCLReport struct {
	Found   bool        `json:"found"`
	Path    string      `json:"path,omitempty"`
	Source  nccl.Source `json:"source,omitempty"`
	Version string      `json:"version,omitempty"`
	Error   string      `json:"error,omitempty"`
	Search  nccl.Search `json:"search"`
}

// RealNCCL opens the library at path and returns its version and the file loaded (a
// bare soname resolved by the dynamic loader).
func RealNCCL(path string) (nccl.Version, string, error) {
	l, err := nccl.Open(path)
	if err != nil {
		return nccl.Version{}, "", err
	}
	return l.Version(), l.Path, nil
}

// ncclLib reports NCCL: where it was found and how, its version, or what to do. A
// missing NCCL is a warning: the GPU backend runs without it, only the nccl
// implementation cannot. Machines without FindNCCL skip the check.
func (r *Report) ncclLib(m Machine, o Options) {
	if m.FindNCCL == nil || m.NCCLVersion == nil {
		return
	}
	const area, name = "nccl", "NCCL library"
	s := m.FindNCCL(o.NCCLLib)
	rep := &NCCLReport{Search: s}
	r.NCCL = rep
	cannot := "the nccl implementation cannot run (the NVSHMEM ones can)"
	if s.Chosen == "" {
		rep.Error = fmt.Sprintf("%s not found in %d places", nccl.LibName, len(s.Tried))
		remedy := nccl.InstallHint
		if o.NCCLLib != "" {
			rep.Error = o.NCCLLib + " (--nccl-lib or SYMMEM_NCCL_LIB): no such file"
			remedy = "fix the path, or leave --nccl-lib and SYMMEM_NCCL_LIB unset to search; " + remedy
		}
		r.add(area, name, Warning, rep.Error+": "+cannot, remedy)
		return
	}
	v, loaded, err := m.NCCLVersion(s.Chosen)
	if err != nil {
		rep.Error = err.Error()
		if s.Source == nccl.SourceLoader && strings.Contains(err.Error(), "dlopen") {
			// The search fell through to the dynamic loader, which did not find it either.
			rep.Error = fmt.Sprintf("%s not found: in none of the %d places searched, nor on the dynamic loader's path", nccl.LibName, len(s.Tried)-1)
		}
		r.add(area, name, Warning, rep.Error+": "+cannot, nccl.InstallHint)
		return
	}
	rep.Found, rep.Path, rep.Source, rep.Version = true, s.Chosen, s.Source, v.String()
	if loaded != "" {
		rep.Path = loaded
	}
	r.add(area, name, OK, fmt.Sprintf("found at %s via %s, version %s", rep.Path, rep.Source, rep.Version), "")
}
