package kernels

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/symmem/symmem/internal/ops"
)

// Impls lists the implementations the catalogue holds, sorted.
func (c *Catalog) Impls() []string {
	var out []string
	for _, a := range c.Artifacts {
		if !slices.Contains(out, a.Impl) {
			out = append(out, a.Impl)
		}
	}
	sort.Strings(out)
	return out
}

// Kernels lists the kernels the catalogue holds for impl, sorted.
func (c *Catalog) Kernels(impl string) []string {
	var out []string
	for _, a := range c.Artifacts {
		if a.Impl == impl && !slices.Contains(out, a.Kernel) {
			out = append(out, a.Kernel)
		}
	}
	sort.Strings(out)
	return out
}

// Host is what decides whether an artifact can be loaded on this machine.
type Host struct {
	// CCs are the compute capabilities (major*10+minor) of the GPUs here, by ordinal;
	// none with NoGPU saying why.
	CCs   []int
	NoGPU string
	// Lib is the NVSHMEM host library's version; zero when it was not found (NoLib
	// says why).
	Lib   [3]int
	NoLib string
}

// LoadsOn says whether the artifact can be loaded on a GPU of h and served by its
// NVSHMEM host library, and if not, why.
func (a *Artifact) LoadsOn(h Host) (bool, string) {
	if len(h.CCs) == 0 {
		why := h.NoGPU
		if why == "" {
			why = "the NVIDIA driver sees no GPU"
		}
		return false, "no GPU here (" + why + ")"
	}
	var fits []string
	for i, cc := range h.CCs {
		if a.Format == "cubin" && runsOn(a, cc) || a.Format == "ptx" && a.Arch <= cc {
			fits = append(fits, fmt.Sprintf("GPU %d", i))
		}
	}
	if len(fits) == 0 {
		return false, fmt.Sprintf("built for %s, the GPUs here are %s: rebuild with --arch %d", a.Target, ccList(h.CCs), h.CCs[0])
	}
	if a.UsesNVSHMEM {
		if h.Lib == ([3]int{}) {
			return false, "NVSHMEM host library not found (" + h.NoLib + ")"
		}
		if err := a.CheckHost(h.Lib); err != nil {
			d := a.DeviceVersion
			return false, fmt.Sprintf("device library %d.%d.%d is newer than host library %d.%d.%d: install NVSHMEM >= %d.%d or rebuild against %d.%d",
				d[0], d[1], d[2], h.Lib[0], h.Lib[1], h.Lib[2], d[0], d[1], h.Lib[0], h.Lib[1])
		}
	}
	how := "cubin"
	if a.Format == "ptx" {
		how = "PTX, compiled by the driver at load"
		if len(a.Link) > 0 {
			how = "PTX, compiled and linked with " + strings.Join(a.Link, ", ") + " by the driver at load"
		}
	}
	return true, fmt.Sprintf("yes: %s (%s)", strings.Join(fits, ", "), how)
}

func ccList(ccs []int) string {
	var s []string
	for _, cc := range ccs {
		s = append(s, fmt.Sprintf("sm_%d", cc))
	}
	slices.Sort(s)
	return strings.Join(slices.Compact(s), ", ")
}

// CheckLoad is the check made before a launch: every kernel of impl named in kernels
// has an artifact for each of the first nproc GPUs of h, which h's host library can
// serve. The error says what to do.
func (c *Catalog) CheckLoad(impl string, kernels []string, h Host, nproc int) error {
	ccs := h.CCs
	if nproc < len(ccs) {
		ccs = ccs[:nproc]
	}
	for _, k := range kernels {
		if !slices.Contains(c.Kernels(impl), k) {
			continue // served by symmem's own kernel (wait_signal), or not asked for
		}
		for _, cc := range ccs {
			a, err := c.Select(impl, k, 0, cc)
			if err != nil {
				return fmt.Errorf("%s in %s: %w", impl, c.Dir, err)
			}
			if err := a.CheckHost(h.Lib); err != nil && h.Lib != ([3]int{}) {
				return fmt.Errorf("%s in %s: %w", impl, c.Dir, err)
			}
		}
	}
	return nil
}

// PeersAll is Artifact.Peers of a put whose kernel reaches every other rank itself.
const PeersAll = "all"

// InPlace says whether impl's kernel puts its buffer in place (Artifact.InPlace): what
// it sends is its own dst, so the rank that runs it receives nothing there.
func (c *Catalog) InPlace(impl, kernel string) bool {
	return slices.ContainsFunc(c.Artifacts, func(a *Artifact) bool {
		return a.Impl == impl && a.Kernel == kernel && a.InPlace
	})
}

// ReachesAll says whether impl's kernel puts to every other rank itself
// (Artifact.Peers): one launch on the sender serves them all.
func (c *Catalog) ReachesAll(impl, kernel string) bool {
	return slices.ContainsFunc(c.Artifacts, func(a *Artifact) bool {
		return a.Impl == impl && a.Kernel == kernel && a.Peers == PeersAll
	})
}

// CheckRanks says whether impl's kernels among kernels serve a job of n ranks: a kernel
// whose world size is a tl.constexpr was built for some job sizes only (Artifact.Ranks),
// and would move nothing in a job of another. The error names the sizes it was built
// for and how to build another.
func (c *Catalog) CheckRanks(impl string, kernels []string, n int) error {
	for _, a := range c.Artifacts {
		if a.Impl != impl || !slices.Contains(kernels, a.Kernel) || len(a.Ranks) == 0 || slices.Contains(a.Ranks, n) {
			continue
		}
		built := make([]string, len(a.Ranks))
		for i, r := range a.Ranks {
			built[i] = strconv.Itoa(r)
		}
		return fmt.Errorf("%s's %s takes the job's size as a tl.constexpr and was built for %s ranks only, not %d: rebuild it for %d with symmem kernels build FILE.py --const on its world size (%s)",
			impl, a.Kernel, strings.Join(built, ","), n, n, a.Wraps)
	}
	return nil
}

// CheckSizes says whether impl's kernels among kernels serve a message of each of
// sizes bytes: a kernel whose size is a tl.constexpr was built for some sizes only
// (Artifact.Sizes), and any other size would move nothing; one with a Unit moves
// whole units only. The error names the sizes it was built for and how to build the
// others, or the unit.
func (c *Catalog) CheckSizes(impl string, kernels []string, sizes []int64) error {
	for _, a := range c.Artifacts {
		if a.Impl != impl || !slices.Contains(kernels, a.Kernel) {
			continue
		}
		for _, n := range sizes {
			if a.Unit > 0 && n%a.Unit != 0 {
				return fmt.Errorf("%s's %s moves whole units of %d bytes (%s): give sizes that are multiples of %d, not %d",
					impl, a.Kernel, a.Unit, a.Wraps, a.Unit, n)
			}
		}
		if len(a.Sizes) == 0 {
			continue
		}
		var missing []string
		for _, n := range sizes {
			if !slices.Contains(a.Sizes, n) && !slices.Contains(missing, strconv.FormatInt(n, 10)) {
				missing = append(missing, strconv.FormatInt(n, 10))
			}
		}
		if len(missing) > 0 {
			built := make([]string, len(a.Sizes))
			for i, n := range a.Sizes {
				built[i] = strconv.FormatInt(n, 10)
			}
			return fmt.Errorf("%s's %s takes its size as a tl.constexpr and was built for %s bytes only, not %s: rebuild with symmem kernels build FILE.py --sizes %s (%s)",
				impl, a.Kernel, strings.Join(built, ","), strings.Join(missing, ","), strings.Join(append(built, missing...), ","), a.Wraps)
		}
	}
	return nil
}

// CheckElems says whether impl's kernels among kernels that take dtype (as the table
// of users' kernels types them; those of no type too) serve count elements in one
// call: a kernel written for one block of a tl.constexpr size (Artifact.MaxElems)
// leaves the rest unserved. The error names the kernel, its limit and the --const
// that builds a larger block.
func (c *Catalog) CheckElems(impl string, kernels []string, dtype string, count int64) error {
	for _, a := range c.Artifacts {
		if a.Impl != impl || !slices.Contains(kernels, a.Kernel) || a.MaxElems <= 0 || count <= a.MaxElems {
			continue
		}
		if dt := userDType(a.Kernel); dt != "" && dt != ops.Canonical(dtype) {
			continue
		}
		block := int64(1)
		for block < count {
			block *= 2
		}
		fn, _, _ := strings.Cut(a.Wraps, ":")
		return fmt.Errorf("%s's %s adds at most %d elements, one block of %s's tl.constexpr %s, not %d: rebuild with symmem kernels build FILE.py --const %s=%d (a power of two) and run its variant %s",
			impl, a.Kernel, a.MaxElems, fn, a.MaxElemsConst, count, a.MaxElemsConst, block, withConst(impl, a.MaxElemsConst, block))
	}
	return nil
}

// withConst is the implementation a build of impl's file with --const name=value
// makes: its variants (IMPL[fn=F][NAME=V]...: fn first, then the constants by name, as
// the build names them) with name set to value.
func withConst(impl, name string, value int64) string {
	base, rest, _ := strings.Cut(impl, "[")
	var fn string
	consts := map[string]string{name: strconv.FormatInt(value, 10)}
	for _, v := range strings.Split(strings.TrimSuffix(rest, "]"), "][") {
		k, val, ok := strings.Cut(v, "=")
		switch {
		case !ok:
		case k == "fn":
			fn = "[" + v + "]"
		case k != name:
			consts[k] = val
		}
	}
	names := make([]string, 0, len(consts))
	for k := range consts {
		names = append(names, k)
	}
	sort.Strings(names)
	out := base + fn
	for _, k := range names {
		out += "[" + k + "=" + consts[k] + "]"
	}
	return out
}

// userDType is the element type the table types kernel's pointers with ("" for one it
// does not type, or no kernel of its).
func userDType(kernel string) string {
	for _, k := range table().kernels {
		if k.Kernel == kernel {
			return k.DType
		}
	}
	return ""
}
