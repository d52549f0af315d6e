package check

// The report's sections, in the order Run takes them.

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/topo"
	"github.com/symmem/symmem/internal/units"
	"github.com/symmem/symmem/pkg/nvshmem"
)

func (r *Report) driver(m Machine, o Options) []int {
	d, err := m.OpenDriver()
	if err != nil {
		r.add("driver", "NVIDIA driver", Failure, err.Error(), "install the NVIDIA driver (CUDA 12 or 13); without it symmem runs on the CPU backend")
		return nil
	}
	v, err := d.Version()
	if err != nil {
		r.add("driver", "NVIDIA driver", Failure, err.Error(), "reinstall the NVIDIA driver; `nvidia-smi` should work")
		return nil
	}
	detail := fmt.Sprintf("libcuda.so.1 loaded, CUDA %d.%d", v/1000, v%1000/10)
	r.add("driver", "NVIDIA driver", OK, detail, "")
	n, err := d.DeviceCount()
	if err != nil || n == 0 {
		why := "the driver sees no GPU"
		if err != nil {
			why = err.Error()
		}
		r.add("gpus", "GPUs", Failure, why, "check `nvidia-smi` and CUDA_VISIBLE_DEVICES")
		return nil
	}
	var ccs []int
	for i := 0; i < n; i++ {
		info, err := d.Device(i)
		if err != nil {
			r.add("gpus", fmt.Sprintf("GPU %d", i), Failure, err.Error(), "check `nvidia-smi`")
			continue
		}
		r.GPUs = append(r.GPUs, info)
		st, remedy := OK, ""
		if info.CC < 70 {
			st, remedy = Failure, "NVSHMEM needs compute capability 7.0 or newer"
		}
		r.add("gpus", fmt.Sprintf("GPU %d", i), st, fmt.Sprintf("%s, sm_%d, %s, %d SMs, bus %s", info.Name, info.CC,
			units.FormatSize(int64(info.MemBytes)), info.SMs, info.PCIBusID), remedy)
		ccs = append(ccs, info.CC)
	}
	switch {
	case o.Launcher != "" && n == 1 && o.NProc > 1:
		r.add("gpus", "GPU count", Info, setting.Textf("this rank sees one GPU of the %d ranks %s put on this host: each is taken to be bound to its own (ranks sharing a GPU fail at NVSHMEM's start, and %s says so)", o.NProc, o.Launcher, setting.Smoke), "")
	case o.Launcher != "" && o.NProc > n:
		r.add("gpus", "GPU count", Failure, fmt.Sprintf("%d GPU(s), and the %d ranks %s put on this host need one GPU each", n, o.NProc, o.Launcher),
			"start as many ranks a host as it has GPUs, or bind each rank to one GPU (Slurm: --gpus-per-task=1)")
	case o.NProc > n:
		r.add("gpus", "GPU count", Failure, fmt.Sprintf("%d GPU(s), and a run of %d ranks needs one GPU per rank", n, o.NProc),
			setting.Textf("run on a machine with more GPUs, or use %s cpu (runs with more ranks than GPUs fall back to it)", setting.Backend))
	}
	r.PeerAccess = make([][]bool, n)
	var missing []string
	for i := 0; i < n; i++ {
		r.PeerAccess[i] = make([]bool, n)
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			ok, _ := d.CanAccessPeer(i, j)
			r.PeerAccess[i][j] = ok
			if !ok {
				missing = append(missing, fmt.Sprintf("%d->%d", i, j))
			}
		}
	}
	switch {
	case n < 2:
		r.add("topology", "peer access", Info, "one GPU: nothing to connect", "")
	case len(missing) > 0:
		r.add("topology", "peer access", Warning, "no P2P path for "+strings.Join(missing, ", "),
			"those pairs need a remote transport (NVSHMEM_REMOTE_TRANSPORT); copy-engine and sm-store cannot run on them. Check the IOMMU/ACS settings and `nvidia-smi topo -m`")
	default:
		r.add("topology", "peer access", OK, fmt.Sprintf("every pair of the %d GPUs can map each other's memory", n), "")
	}
	return ccs
}

func (r *Report) topology(m Machine) {
	if m.NVML == nil {
		return
	}
	t, err := topo.Read(m.NVML)
	if err != nil {
		r.add("topology", "links (NVML)", Warning, err.Error(), "libnvidia-ml.so.1 comes with the driver; without it the bench cannot show % of peak")
		return
	}
	r.Topology = t
	if len(t.GPUs) < 2 {
		return
	}
	var nv, pcie int
	for i := range t.Links {
		for j := range t.Links[i] {
			if i == j {
				continue
			}
			if t.Links[i][j].NVLinks > 0 {
				nv++
			} else {
				pcie++
			}
		}
	}
	l := t.Links[0][1]
	detail := fmt.Sprintf("GPU0-GPU1 %s, %.0f GB/s per direction", l.Label(), l.GBps)
	if pcie == 0 {
		r.add("topology", "links (NVML)", OK, "NVLink between every pair; "+detail, "")
	} else if nv == 0 {
		r.add("topology", "links (NVML)", Warning, "no NVLink: PCIe only; "+detail, "expect PCIe bandwidth; the bench's % peak uses the PCIe rate")
	} else {
		r.add("topology", "links (NVML)", Info, fmt.Sprintf("%d ordered pairs on NVLink, %d on PCIe; %s", nv, pcie, detail), "")
	}
}

func (r *Report) library(m Machine, o Options) [3]int {
	s := m.FindLib(o.NVSHMEMLib)
	r.Library = &s
	if s.Chosen == "" {
		detail := fmt.Sprintf("%s not found in %d places", nvshmem.LibName, len(s.Tried))
		if o.NVSHMEMLib != "" {
			r.add("nvshmem", "host library", Failure, setting.Textf("%s (%s or SYMMEM_NVSHMEM_LIB): no such file", o.NVSHMEMLib, setting.NVSHMEMLib), installHint)
			r.LibraryMissing = true
			return [3]int{}
		}
		r.add("nvshmem", "host library", Failure, detail, installHint)
		r.LibraryMissing = true
		return [3]int{}
	}
	v, err := m.LibVersion(s.Chosen)
	if err != nil {
		detail := err.Error()
		if !strings.Contains(s.Chosen, "/") {
			// The search fell through to the dynamic loader, which did not find it either.
			detail = fmt.Sprintf("%s not found: in none of the %d places searched, nor on the dynamic loader's path", nvshmem.LibName, len(s.Tried)-1)
		}
		r.add("nvshmem", "host library", Failure, detail, installHint)
		r.LibraryMissing = true
		return [3]int{}
	}
	r.LibVersion = fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
	r.add("nvshmem", "host library", OK, fmt.Sprintf("%s, version %s", s.Chosen, r.LibVersion), "")
	if strings.Contains(s.Chosen, "/") {
		dir := filepath.Dir(s.Chosen)
		if m.Exists(filepath.Join(dir, "nvshmem_bootstrap_uid.so.3")) {
			r.add("nvshmem", "UID bootstrap plugin", OK, filepath.Join(dir, "nvshmem_bootstrap_uid.so.3"), "")
		} else {
			r.add("nvshmem", "UID bootstrap plugin", Info, "no nvshmem_bootstrap_uid.so.3 beside the library: this build carries the unique-ID bootstrap inside libnvshmem_host (as the 3.4 pip wheel does)",
				"if init fails with a bootstrap error, install the full NVSHMEM package, which ships the plugin")
		}
		if m.Exists(filepath.Join(dir, "libnvshmem_device.bc")) {
			r.add("nvshmem", "device bitcode", OK, filepath.Join(dir, "libnvshmem_device.bc")+" (for rebuilding kernels)", "")
		} else {
			r.add("nvshmem", "device bitcode", Info, "libnvshmem_device.bc not found: needed only to rebuild the kernels (scripts/build-kernels.sh)", "")
		}
		r.remoteTransport(m, dir)
	}
	return v
}

// remoteTransports are NVSHMEM's transport plugins between nodes, by file name.
var remoteTransports = []string{"ibrc", "ibgda", "ibdevx", "ucx", "libfabric"}

// remoteTransport says which transports between nodes this NVSHMEM build has beside
// it, and which one the environment picks: on one node none is needed.
func (r *Report) remoteTransport(m Machine, dir string) {
	var found []string
	for _, t := range remoteTransports {
		if m.Exists(filepath.Join(dir, "nvshmem_transport_"+t+".so.3")) {
			found = append(found, t)
		}
	}
	chosen := "unset (NVSHMEM's default, ibrc)"
	for _, kv := range m.Environ {
		if v, ok := strings.CutPrefix(kv, "NVSHMEM_REMOTE_TRANSPORT="); ok {
			chosen = v
		}
	}
	if len(found) == 0 {
		r.add("nvshmem", "remote transport", Info, "no transport plugin between nodes beside the library (nvshmem_transport_*.so.3): ranks on one node talk over NVLink/PCIe, which is all a one-node job needs",
			"for jobs over several nodes install an NVSHMEM build with a remote transport (ibrc/ibgda for InfiniBand, ucx, libfabric for EFA) and set NVSHMEM_REMOTE_TRANSPORT")
		return
	}
	r.add("nvshmem", "remote transport", OK, fmt.Sprintf("plugins beside the library: %s; NVSHMEM_REMOTE_TRANSPORT %s", strings.Join(found, ", "), chosen), "")
}

// buildTools says whether this machine can build a user's kernels (symmem kernels
// build): not needed to run symmem, nor to run kernels built elsewhere.
func (r *Report) buildTools(m Machine, o Options) {
	if m.BuildTools == nil {
		return
	}
	ctx := o.Context
	if ctx == nil {
		ctx = context.Background()
	}
	t, err := m.BuildTools(ctx)
	if err != nil {
		r.add("kernels", "building your own", Info, err.Error(),
			setting.Textf("needed only to build your own kernels; kernels built elsewhere need only this binary (%s DIR)", setting.Kernels))
		return
	}
	r.BuildTools = &t
	r.add("kernels", "building your own", OK, fmt.Sprintf("symmem kernels build can run here: %s, Triton %s, NVSHMEM device library %s (%s)",
		t.Python, t.Triton, t.DeviceLibrary, t.NVSHMEMWheel), "")
}

func (r *Report) kernels(m Machine, ccs []int, host [3]int, reg *backend.Registry) {
	c := m.Catalog
	r.add("kernels", "embedded kernels", Info, fmt.Sprintf("%d artifacts for %s; Triton %s; NVSHMEM device library %s",
		len(c.Artifacts), strings.Join(c.Targets(), ", "), c.TritonVersion(), c.DeviceVersion()), "")
	seen := map[int]bool{}
	for _, cc := range ccs {
		if seen[cc] {
			continue
		}
		seen[cc] = true
		// Every GPU implementation that launches kernels, from the registry; the first
		// is the default, which a run cannot do without.
		for i, im := range reg.Of(backend.NVSHMEM) {
			if len(im.Kernels[ops.Put]) == 0 {
				continue // the copy engine needs no kernel
			}
			impl, kernel, isDefault := im.Name, im.Kernels[ops.Put][0], i == 0
			kc := KernelCompat{CC: cc, Impl: impl, Format: "none"}
			a, err := c.Select(impl, kernel, 0, cc)
			if err != nil {
				kc.Error = err.Error()
			} else {
				kc.Format, kc.Target = a.Format, a.Target
				if host != ([3]int{}) {
					if err := a.CheckHost(host); err != nil {
						kc.Error = err.Error()
					}
				}
			}
			r.Kernels = append(r.Kernels, kc)
			name := fmt.Sprintf("%s for sm_%d", impl, cc)
			switch {
			case kc.Error != "" && isDefault:
				r.add("kernels", name, Failure, kc.Error, "rebuild the kernels for this GPU and NVSHMEM: scripts/build-kernels.sh --arch "+fmt.Sprint(cc))
			case kc.Error != "":
				r.add("kernels", name, Warning, kc.Error, setting.Textf("%s %s still works; rebuild with scripts/build-kernels.sh for the rest", setting.Impl, reg.Of(backend.NVSHMEM)[0].Name))
			case kc.Format == "ptx":
				how := "compile the " + kc.Target + " PTX"
				if len(a.Link) > 0 {
					how += " and link it with " + strings.Join(a.Link, ", ") + " from beside the host library"
				}
				r.add("kernels", name, Warning, "no cubin for this GPU: the driver will "+how+" at load (slower start, no arch-specific code)",
					"rebuild with scripts/build-kernels.sh --arch "+fmt.Sprint(cc))
			default:
				r.add("kernels", name, OK, fmt.Sprintf("cubin %s, %s", kc.Target, a.BuiltAgainst()), "")
			}
		}
	}
}

func (r *Report) environment(m Machine) {
	for _, kv := range m.Environ {
		k, v, _ := strings.Cut(kv, "=")
		meaning, known := envMeanings[k]
		if !known && !strings.HasPrefix(k, "NVSHMEM_") {
			continue
		}
		if !known {
			meaning = "an NVSHMEM setting symmem does not know; see NVSHMEM's environment documentation"
		}
		r.Env = append(r.Env, EnvVar{Name: k, Value: v, Meaning: meaning})
	}
	sort.Slice(r.Env, func(i, j int) bool { return r.Env[i].Name < r.Env[j].Name })
	for _, e := range r.Env {
		if e.Name == "NVSHMEM_DISABLE_P2P" && e.Value == "1" {
			r.add("environment", e.Name, Warning, "peer-to-peer is disabled", "unset NVSHMEM_DISABLE_P2P unless you mean to measure the proxy path")
		}
		if e.Name == "NVSHMEM_SYMMETRIC_SIZE" {
			r.add("environment", e.Name, Info, "set to "+e.Value+": symmem will not size the heap itself", "")
		}
		if e.Name == "NCCL_NVLS_ENABLE" && e.Value != "0" {
			r.add("environment", e.Name, Warning, "set to "+e.Value+": NCCL may use NVLink SHARP multicast",
				"on shared hosts set NCCL_NVLS_ENABLE=0, or unset it: symmem's nccl implementation then sets 0")
		}
	}
	nvls := false
	for _, e := range r.Env {
		nvls = nvls || e.Name == "NVSHMEM_DISABLE_NVLS" && e.Value == "1"
	}
	if !nvls {
		r.add("environment", "NVSHMEM_DISABLE_NVLS", Info, "not set: NVSHMEM may use NVLink SHARP multicast where the system offers it",
			"on shared hosts set NVSHMEM_DISABLE_NVLS=1")
	}
}

func (r *Report) memory(o Options) {
	if r.Topology == nil || len(r.Topology.GPUs) == 0 || o.Heap == 0 {
		return
	}
	need := uint64(nvshmem.SymmetricSize(o.Heap))
	for _, g := range r.Topology.GPUs {
		if g.Index >= o.NProc {
			break
		}
		if g.FreeBytes < need {
			r.add("memory", fmt.Sprintf("GPU %d heap", g.Index), Failure,
				fmt.Sprintf("a default bench needs %s of symmetric heap, %s is free", units.FormatSize(int64(need)), units.FormatSize(int64(g.FreeBytes))),
				setting.Textf("free GPU memory (other processes in nvidia-smi) or lower %s", setting.MaxSize))
			return
		}
	}
	r.add("memory", "symmetric heap", OK, fmt.Sprintf("a default bench needs %s per GPU; enough is free on GPUs 0..%d",
		units.FormatSize(int64(need)), min(o.NProc, len(r.Topology.GPUs))-1), "")
}
