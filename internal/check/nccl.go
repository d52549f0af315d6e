package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/symmem/symmem/internal/nccl"
	"github.com/symmem/symmem/internal/setting"
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
	// Serves lists the NCCL implementations this release can run (nccl, nccl-symm,
	// nccl-device), Cannot says for each of the others which release it needs.
	Serves []string          `json:"serves,omitempty"`
	Cannot map[string]string `json:"cannot,omitempty"`
}

// ncclPaths are symmem's NCCL implementations and the first release each needs (the
// nccl one runs on any NCCL Open takes: 2.13 or newer).
var ncclPaths = []struct {
	impl string
	need nccl.Version
}{{"nccl", nccl.Version{Major: 2, Minor: 13}}, {"nccl-symm", nccl.SymmetricSince}, {"nccl-device", nccl.DeviceSince}}

// serves fills in which implementations release v can run, and says so in a line.
func (rep *NCCLReport) serves(v nccl.Version, words setting.Words) string {
	var cannot []string
	for _, p := range ncclPaths {
		if v.AtLeast(p.need) {
			rep.Serves = append(rep.Serves, p.impl)
			continue
		}
		if rep.Cannot == nil {
			rep.Cannot = map[string]string{}
		}
		rep.Cannot[p.impl] = fmt.Sprintf("needs NCCL %d.%d or newer", p.need.Major, p.need.Minor)
		cannot = append(cannot, fmt.Sprintf("%s needs %d.%d", p.impl, p.need.Major, p.need.Minor))
	}
	line := "; serves " + words.Word(setting.Impl) + " " + strings.Join(rep.Serves, ", ")
	if len(cannot) > 0 {
		line += " (" + strings.Join(cannot, ", ") + ")"
	}
	return line
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
	// The report shows where it looked, the setting among the places worded.
	word := func(s nccl.Source) nccl.Source {
		if s == nccl.SourceExplicit {
			return nccl.Source(r.words.Word(setting.NCCLLib))
		}
		return s
	}
	s.Source = word(s.Source)
	s.Tried = slices.Clone(s.Tried)
	for i, c := range s.Tried {
		s.Tried[i].Source = word(c.Source)
	}
	rep := &NCCLReport{Search: s}
	r.NCCL = rep
	cannot := "the nccl implementation cannot run (the NVSHMEM ones can)"
	if s.Chosen == "" {
		rep.Error = fmt.Sprintf("%s not found in %d places", nccl.LibName, len(s.Tried))
		remedy := nccl.InstallHint
		if o.NCCLLib != "" {
			rep.Error = r.words.Sprintf("%s (%s or SYMMEM_NCCL_LIB): no such file", o.NCCLLib, setting.NCCLLib)
			remedy = setting.Textf("fix the path, or leave %s and SYMMEM_NCCL_LIB unset to search; %s", setting.NCCLLib, remedy)
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
	r.add(area, name, OK, fmt.Sprintf("found at %s via %s, version %s", rep.Path, rep.Source, rep.Version)+rep.serves(v, r.words), "")
}
