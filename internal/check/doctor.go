package check

import (
	"context"
	"os"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backends"
	"github.com/symmem/symmem/internal/cuda"
	"github.com/symmem/symmem/internal/engine"
	"github.com/symmem/symmem/internal/nccl"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/topo"
	"github.com/symmem/symmem/pkg/kernels"
	"github.com/symmem/symmem/pkg/nvshmem"
)

// installHint says how to get NVSHMEM and how to point symmem at it.
var installHint = setting.Textf(nvshmem.InstallHintFor("symmem", "%s, SYMMEM_NVSHMEM_LIB"), setting.NVSHMEMLib)

// Status of one check.
type Status string

const (
	OK      Status = "ok"
	Warning Status = "warning"
	Failure Status = "failure"
	Info    Status = "info"
)

// Check is one line of the report.
type Check struct {
	Area   string `json:"area"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Remedy string `json:"remedy,omitempty"`
}

// Driver is what the checks need from the CUDA driver (cuda.Driver implements it).
type Driver interface {
	Version() (int, error)
	DeviceCount() (int, error)
	Device(ordinal int) (cuda.DeviceInfo, error)
	CanAccessPeer(a, b int) (bool, error)
}

// Machine is everything the checks look at.
type Machine struct {
	OpenDriver func() (Driver, error)
	NVML       topo.NVML
	FindLib    func(explicit string) nvshmem.Search
	// LibVersion loads the host library and reads its version.
	LibVersion func(path string) ([3]int, error)
	Catalog    *kernels.Catalog
	Environ    []string
	Exists     func(path string) bool
	// FindNCCL and NCCLVersion look for libnccl.so.2 and load it (RealNCCL); a machine
	// without them skips the NCCL check.
	FindNCCL    func(explicit string) nccl.Search
	NCCLVersion func(path string) (v nccl.Version, loaded string, err error)
	// BuildTools says what `symmem kernels build` would use here (RealBuildTools); a
	// machine without it skips the check.
	BuildTools func(ctx context.Context) (BuildTools, error)
}

// BuildTools are what a build of a user's kernels uses on this machine.
type BuildTools struct {
	Python        string `json:"python"`
	Triton        string `json:"triton"`
	NVSHMEMWheel  string `json:"nvshmem_wheel"`
	DeviceLibrary string `json:"device_library"`
}

// Real is this machine.
func Real() Machine {
	return Machine{
		OpenDriver: func() (Driver, error) { return cuda.Open() },
		NVML:       topo.SystemNVML(),
		FindLib:    nvshmem.Find,
		LibVersion: func(path string) ([3]int, error) {
			l, err := nvshmem.Open(path)
			if err != nil {
				return [3]int{}, err
			}
			return l.Version, nil
		},
		Catalog:     kernels.Default(),
		Environ:     os.Environ(),
		FindNCCL:    nccl.Find,
		NCCLVersion: RealNCCL,
		BuildTools:  RealBuildTools,
		Exists: func(p string) bool {
			_, err := os.Stat(p)
			return err == nil
		},
	}
}

// Options shape the checks.
type Options struct {
	NVSHMEMLib string
	NCCLLib    string // --nccl-lib or SYMMEM_NCCL_LIB; "" searches
	NProc      int    // ranks a default run uses on this host
	Heap       int64  // symmetric heap a default run needs per rank
	// Launcher names the external launcher that started this process ("" none): NProc
	// is then the ranks it put on this host, and a rank that sees one GPU was bound to
	// it by the launcher (as a run takes it: gpu.GPUIndex).
	Launcher string
	// LaunchErr is what keeps that launcher's job from starting on any backend (a job
	// over several hosts without a secret, a bad store address).
	LaunchErr error
	// Context ends the checks' subprocesses (nil: they run to their own limits).
	Context context.Context
	// Registry is the implementations whose kernels the checks load (nil: those of
	// every backend, and Heap a default bench sweep's on them).
	Registry *backend.Registry
	// Words name the settings the report's details and remedies speak of (the CLI's
	// flags).
	Words setting.Words
}

// Report is the whole answer.
type Report struct {
	Checks         []Check           `json:"checks"`
	GPUs           []cuda.DeviceInfo `json:"gpus,omitempty"`
	Topology       *topo.Topology    `json:"topology,omitempty"`
	PeerAccess     [][]bool          `json:"peer_access,omitempty"`
	Library        *nvshmem.Search   `json:"nvshmem_search,omitempty"`
	LibraryMissing bool              `json:"nvshmem_missing,omitempty"`
	LibVersion     string            `json:"nvshmem_version,omitempty"`
	Kernels        []KernelCompat    `json:"kernels,omitempty"`
	Env            []EnvVar          `json:"environment"`
	GPUBackendOK   bool              `json:"gpu_backend_ok"`
	Smoke          map[string]any    `json:"smoke,omitempty"`
	Perf           *Perf             `json:"perf,omitempty"`
	NCCL           *NCCLReport       `json:"nccl,omitempty"`
	BuildTools     *BuildTools       `json:"build_tools,omitempty"`
	words          setting.Words
}

// KernelCompat says what runs on one GPU architecture.
type KernelCompat struct {
	CC     int    `json:"compute_capability"`
	Impl   string `json:"impl"`
	Format string `json:"format"` // cubin, ptx or none
	Target string `json:"target,omitempty"`
	Error  string `json:"error,omitempty"`
}

// EnvVar is one variable that changes NVSHMEM's or CUDA's behaviour.
type EnvVar struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Meaning string `json:"meaning"`
}

// envMeanings explains the variables worth knowing about.
var envMeanings = map[string]string{
	"NVSHMEM_SYMMETRIC_SIZE":             "size of each PE's symmetric heap; symmem sizes it for the run when unset",
	"NVSHMEM_DISABLE_NVLS":               "1 keeps NVSHMEM off NVLink SHARP multicast (keep it set on shared hosts)",
	"NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME":  "network interface the unique-ID bootstrap listens on; set it when ranks span nodes and the default picks the wrong one",
	"NVSHMEM_BOOTSTRAP_UID_SOCK_FAMILY":  "AF_INET or AF_INET6 for the unique-ID bootstrap",
	"NVSHMEM_BOOTSTRAP":                  "bootstrap method; symmem uses the unique ID and ignores PMI/MPI settings",
	"NVSHMEM_REMOTE_TRANSPORT":           "transport between nodes (ibrc, ucx, libfabric, none); none is enough on one node",
	"NVSHMEM_DISABLE_NCCL":               "1 stops NVSHMEM from loading NCCL for its collectives; symmem sets it unless you do (it needs no collectives, and NCCL cost 1 s of start-up and teardown on 2 x H200)",
	"NVSHMEM_DEBUG":                      "WARN, INFO or TRACE: NVSHMEM's own log, the first thing to set when init fails",
	"NVSHMEM_DISABLE_CUDA_VMM":           "1 makes NVSHMEM use legacy cudaMalloc heaps instead of the VMM API",
	"NVSHMEM_CUMEM_GRANULARITY":          "granularity of the symmetric heap's physical allocations",
	"NVSHMEM_HOME":                       "where symmem looks for lib/libnvshmem_host.so.3",
	"NVSHMEM_LIB_DIR":                    "a directory symmem searches for libnvshmem_host.so.3",
	"SYMMEM_NVSHMEM_LIB":                 "the exact host library symmem loads",
	"CUDA_VISIBLE_DEVICES":               "which GPUs the ranks see; rank r uses the r-th visible GPU",
	"CUDA_DEVICE_MAX_CONNECTIONS":        "hardware queues per GPU; low values can serialise streams",
	"NCCL_NVLS_ENABLE":                   "0 keeps NCCL off NVLink SHARP multicast; symmem's nccl implementation sets 0 unless you set it",
	"NCCL_HOME":                          "where symmem looks for lib/libnccl.so.2",
	"SYMMEM_NCCL_LIB":                    "the exact libnccl.so.2 symmem loads",
	"NCCL_DEBUG":                         "WARN or INFO: NCCL's own log, the first thing to set when a communicator fails",
	"TORCH_SYMM_MEM_DISABLE_MULTICAST":   "1 keeps PyTorch's symmetric memory off multicast",
	"NVSHMEM_ENABLE_NIC_PE_MAPPING":      "maps PEs to NICs; matters on multi-NIC nodes only",
	"NVSHMEM_IB_ENABLE_IBGDA":            "GPU-initiated InfiniBand (IBGDA) between nodes",
	"NVSHMEM_MAX_TEAMS":                  "number of teams NVSHMEM reserves memory for",
	"NVSHMEM_DISABLE_P2P":                "1 forbids NVLink/PCIe peer access: every put goes through the proxy (slow)",
	"NVSHMEM_BOOTSTRAP_UID_SESSION_ID":   "lets jobs share a bootstrap port without mixing",
	"NVSHMEM_BOOTSTRAP_TWO_STAGE":        "two-stage bootstrap for very large jobs",
	"NVSHMEM_INFO":                       "1 prints NVSHMEM's configuration at init",
	"NVSHMEM_CUDA_PATH":                  "where NVSHMEM looks for the CUDA runtime",
	"NVSHMEM_DISABLE_GDRCOPY":            "1 turns off GDRCopy for the proxy",
	"NVSHMEM_BOOTSTRAP_UID_SOCK_TIMEOUT": "how long ranks wait for the bootstrap",
}

// add records a check: its detail and remedy are strings, or a setting.Text, an
// error or anything else that names settings by value, worded here.
func (r *Report) add(area, name string, st Status, detail, remedy any) {
	r.Checks = append(r.Checks, Check{Area: area, Name: name, Status: st, Detail: r.words.Sprintf("%v", detail), Remedy: r.words.Sprintf("%v", remedy)})
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	for _, c := range r.Checks {
		if c.Status == Failure {
			return true
		}
	}
	return false
}

// Run performs every check.
func Run(m Machine, o Options) *Report {
	if o.Registry == nil {
		o.Registry = backend.Builtin(backends.All()...)
		if o.Heap == 0 {
			o.Heap = engine.DefaultBenchHeap(o.Registry)
		}
	}
	r := &Report{words: o.Words}
	ccs := r.driver(m, o)
	r.topology(m)
	libVer := r.library(m, o)
	r.ncclLib(m, o)
	r.kernels(m, ccs, libVer, o.Registry)
	r.buildTools(m, o)
	r.memory(o)
	r.environment(m)
	if o.LaunchErr != nil {
		r.add("launcher", "the launcher's job", Failure, o.LaunchErr, "")
	}
	r.GPUBackendOK = !r.Failed()
	return r
}
