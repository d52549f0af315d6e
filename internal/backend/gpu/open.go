package gpu

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/cuda"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/topo"
	"github.com/symmem/symmem/pkg/kernels"
	"github.com/symmem/symmem/pkg/nvshmem"
)

// installHint says how to get NVSHMEM and how to point symmem at it.
var installHint = setting.Textf(nvshmem.InstallHintFor("symmem", "%s, SYMMEM_NVSHMEM_LIB"), setting.NVSHMEMLib)

// Place is where this rank sits: its number, its GPU on the node, the job size.
type Place struct{ Rank, LocalRank, Size int }

// KV is how ranks exchange the NVSHMEM unique ID: rank 0 sets it, the others get it,
// blocking until it is set. The rendezvous store's client satisfies it.
type KV interface {
	Set(ctx context.Context, key string, v []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
}

// Config is what a job decides about its ranks' backends.
type Config struct {
	Heap int64 // symmetric bytes per rank
	// Lib is an explicit libnvshmem_host path (or its directory); "" searches for it.
	Lib string
	// WaitLimit bounds every wait on a peer's signal (backend.DefaultWaitLimit when
	// zero): past it the wait reports backend.ErrUndelivered instead of holding the GPU.
	WaitLimit time.Duration
	// NCCLLib is an explicit libnccl.so.2 for the nccl implementation; "" searches
	// (nccl.Find). NCCL is opened only when a job first runs a collective with it.
	NCCLLib string
	// Registry says which implementation serves which op (nil: symmem's own GPU
	// implementations).
	Registry *backend.Registry
}

// uidKey is where rank 0 leaves the NVSHMEM unique ID in the KV.
const uidKey = "nvshmem/uid"

// Probe says whether the GPU backend can run here; the error says why not. local < 0:
// symmem starts nproc ranks on this machine, one GPU each; local >= 0: this process is
// the rank of local rank local that an external launcher started (GPUIndex finds its
// GPU).
func Probe(nproc, local int, lib string) error {
	n, err := gpuCount()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("the NVIDIA driver sees no GPU")
	}
	if local >= 0 {
		if _, err := GPUIndex(local, n); err != nil {
			return err
		}
	} else if n < nproc {
		return &FewGPUsError{setting.Textf("%s %d needs %d GPUs, this machine has %d: lower %s or use %s cpu", setting.NProc, nproc, nproc, n, setting.NProc, setting.Backend)}
	}
	// Finding the library is enough here: loading it (tens of MB) is the workers' job,
	// and a library that fails to load fails there with its own message.
	s := nvshmem.Find(lib)
	if lib != "" && s.Chosen == "" {
		return setting.Errorf("NVSHMEM host library %s (%s or SYMMEM_NVSHMEM_LIB): no such file", lib, setting.NVSHMEMLib)
	}
	if s.Chosen == "" || s.Chosen == nvshmem.LibName && !nvshmem.Loadable() {
		return setting.Errorf("NVSHMEM host library %s not found; %s. Searched, in order:\n  %s\n  (and the dynamic loader's path)",
			nvshmem.LibName, installHint, strings.Join(s.Tried[:len(s.Tried)-1], "\n  "))
	}
	return nil
}

// GPUIndex is the GPU (of the n this process sees) that the rank of local rank local
// drives: its local rank where it sees a GPU per local rank, the one it sees where its
// launcher gave each rank a GPU of its own (Slurm's --gpus-per-task, a
// CUDA_VISIBLE_DEVICES per rank), as PyTorch's local_rank % device_count would.
func GPUIndex(local, n int) (int, error) {
	switch {
	case local < n:
		return local, nil
	case n == 1:
		return 0, nil
	}
	return 0, &FewGPUsError{setting.Textf("local rank %d needs GPU %d, and this process sees %d GPUs: start at most %d ranks per node, or give each rank a GPU of its own (CUDA_VISIBLE_DEVICES)", local, local, n, n)}
}

// FewGPUsError is Probe's error where the driver sees GPUs, but fewer than the ranks
// need: nothing is missing to install, and it says what to do itself.
type FewGPUsError struct{ msg setting.Text }

func (e *FewGPUsError) Error() string { return e.msg.String() }

// Say is the error with the settings it names worded by w.
func (e *FewGPUsError) Say(w setting.Words) string { return e.msg.Say(w) }

// gpuCount counts GPUs without creating a CUDA context in the launcher (cuInit costs
// about 240 ms on an H200 host): the driver's /proc entries, when CUDA_VISIBLE_DEVICES
// does not narrow them; cuDeviceGetCount otherwise.
func gpuCount() (int, error) {
	if err := cuda.Loadable(); err != nil {
		return 0, err
	}
	if os.Getenv("CUDA_VISIBLE_DEVICES") == "" {
		if gpus, _ := filepath.Glob("/proc/driver/nvidia/gpus/*"); len(gpus) > 0 {
			return len(gpus), nil
		}
	}
	d, err := cuda.Open()
	if err != nil {
		return 0, err
	}
	return d.DeviceCount()
}

// defaults are NVSHMEM settings symmem applies unless the user set them.
// NVSHMEM_DISABLE_NCCL: NVSHMEM otherwise loads NCCL and builds a communicator for its
// collectives, which symmem never calls; measured on 2 x H200 that cost 570 ms of init
// and 480 ms of finalize, half of a whole `run put`.
var defaults = map[string]string{"NVSHMEM_DISABLE_NCCL": "1"}

// Environment returns the KEY=VALUE settings a rank of a job with heap bytes per rank
// needs and getenv does not already set: the symmetric heap's size (NVSHMEM allocates
// it once, at init) and the defaults. symmem's launcher passes them to the workers it
// spawns; Open applies them itself under an external launcher, where nobody did.
func Environment(heap int64, getenv func(string) string) []string {
	var out []string
	if getenv("NVSHMEM_SYMMETRIC_SIZE") == "" {
		out = append(out, "NVSHMEM_SYMMETRIC_SIZE="+strconv.FormatInt(nvshmem.SymmetricSize(heap), 10))
	}
	for _, k := range slices.Sorted(maps.Keys(defaults)) {
		if getenv(k) == "" {
			out = append(out, k+"="+defaults[k])
		}
	}
	return out
}

// Open sets up rank p.Rank: its GPU (p.LocalRank), the NVSHMEM team, bootstrapped from
// a unique ID exchanged through kv, and the symmetric heap. It runs in the order NVSHMEM
// needs: the GPU's context current before init, the environment set before init reads
// it. Breakdown reports how long each step took.
func Open(ctx context.Context, p Place, kv KV, cfg Config) (*Backend, error) {
	t := time.Now()
	lap := map[string]float64{}
	step := func(name string) {
		lap[name] = float64(time.Since(t).Microseconds()) / 1000
		t = time.Now()
	}
	drv, err := cuda.Open()
	if err != nil {
		return nil, err
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, err
	}
	dev, err := GPUIndex(p.LocalRank, n)
	if err != nil {
		return nil, fmt.Errorf("rank %d: %v", p.Rank, err)
	}
	version, _ := drv.Version() // only ever printed
	step("driver")              // dlopen libcuda and cuInit
	info, err := drv.Device(dev)
	if err != nil {
		return nil, err
	}
	cctx, err := drv.Retain(dev)
	if err != nil {
		return nil, err
	}
	step("context")
	s := nvshmem.Find(cfg.Lib)
	if s.Chosen == "" {
		return nil, setting.Errorf("NVSHMEM host library not found; %s", installHint)
	}
	l, err := nvshmem.Open(s.Chosen)
	if err != nil {
		return nil, setting.Errorf("%v; %s", err, installHint)
	}
	lib := nvshmemLib{l}
	step("dlopen")
	for _, kv := range Environment(cfg.Heap, os.Getenv) {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	uid, err := exchangeUID(ctx, p, kv, lib)
	if err != nil {
		return nil, err
	}
	step("uid")
	if err := lib.Init(p.Rank, p.Size, uid); err != nil {
		return nil, fmt.Errorf("rank %d: NVSHMEM init: %w", p.Rank, err)
	}
	step("nvshmem")
	b, err := start(p, cudaDevice{cctx}, lib, info.CC, cfg)
	if err != nil {
		return nil, err
	}
	b.times, b.info, b.driver, b.libPath = lap, info, version, l.Path
	b.openComm = openNCCL(ctx, p, kv, cfg.NCCLLib)
	b.openGemm = openCublas(b.dev)
	b.probeLinks = nvlinkEverywhere(ctx, p, kv, info.PCIBusID)
	step("heap")
	return b, nil
}

// exchangeUID returns the job's NVSHMEM unique ID: rank 0 makes it and publishes it
// in kv, every other rank waits for it there.
func exchangeUID(ctx context.Context, p Place, kv KV, lib shmem) (nvshmem.UID, error) {
	if p.Rank == 0 {
		uid, err := lib.NewUID()
		if err != nil {
			return nvshmem.UID{}, err
		}
		return uid, kv.Set(ctx, uidKey, uid[:])
	}
	var uid nvshmem.UID
	v, err := kv.Get(ctx, uidKey)
	if err != nil {
		return uid, fmt.Errorf("waiting for rank 0's NVSHMEM unique ID: %w", err)
	}
	if len(v) != len(uid) {
		return uid, fmt.Errorf("rank 0's NVSHMEM unique ID (key %s) is %d bytes, want %d", uidKey, len(v), len(uid))
	}
	copy(uid[:], v)
	return uid, nil
}

// start carves the heap and makes the main stream: the part of Open after NVSHMEM's
// init, which the tests run on a fake device. cc picks the kernels' target.
func start(p Place, dev device, lib shmem, cc int, cfg Config) (*Backend, error) {
	b := &Backend{
		rank: p.Rank, size: p.Size, dev: dev, lib: lib, cc: cc, cat: kernels.Default(),
		waitLimit: cfg.WaitLimit, reg: cfg.Registry, funcs: map[string]function{}, byFile: map[string]module{},
		selected: map[selectKey]selection{},
	}
	if b.reg == nil {
		b.reg = backend.Builtin(Factory{})
	}
	b.ll = os.Getenv(EnvLL) != "0"
	b.ptxOnly = os.Getenv(EnvPTX) == "1"
	var err error
	if b.ll128, err = parseLL128(os.Getenv(EnvLL128)); err != nil {
		return nil, err
	}
	if b.ownBlocks, err = ownBlocks(os.Getenv(EnvCopyOwn)); err != nil {
		return nil, err
	}
	b.steps = defaultStagedSteps
	if v, err := strconv.Atoi(os.Getenv(EnvStagedSteps)); err == nil && v > 0 {
		b.steps = v
	}
	if b.waitLimit <= 0 {
		b.waitLimit = backend.DefaultWaitLimit
	}
	// The collective kernels' barrier words sit past the heap the job asked for
	// (NVSHMEM_SYMMETRIC_SIZE leaves room for them).
	syncOff := backend.Align(cfg.Heap, backend.HeapAlign)
	if b.base, err = lib.Malloc(uint64(syncOff + syncArea(p.Size))); err != nil {
		return nil, err
	}
	b.alloc = backend.Bump{Limit: cfg.Heap}
	b.sync = b.base + uintptr(syncOff)
	b.peers = make([]uintptr, b.size)
	for pe := range b.peers {
		b.peers[pe] = lib.PeerPtr(b.base, pe)
	}
	if b.main, err = dev.NewStream(); err != nil {
		return nil, err
	}
	b.lanes = []stream{b.main}
	if b.mail, err = openMailbox(dev); err != nil {
		return nil, err
	}
	return b, nil
}

// Close leaves the team and frees what Open and the operations made. It is collective
// (NVSHMEM's free and finalize are), and reports nothing: a rank that is closing has
// nothing left to do about a failure.
func (b *Backend) Close() error {
	if b.main != nil {
		b.joinLanes()
		b.main.Synchronize()
	}
	b.closeWindows()
	if b.comm != nil {
		b.comm.Destroy()
	}
	if b.gemm != nil {
		b.gemm.Destroy()
	}
	if b.lib != nil {
		b.lib.BarrierAll()
		for _, m := range b.registered {
			b.lib.ModuleFinalize(m)
		}
		if b.base != 0 {
			b.lib.Free(b.base)
		}
		b.lib.Finalize()
	}
	for i := range b.side {
		b.side[i].Destroy()
		b.fork[i].Destroy()
		b.join[i].Destroy()
	}
	for _, s := range b.lanes[min(1, len(b.lanes)):] {
		s.Destroy()
	}
	for _, e := range b.laneDone {
		e.Destroy()
	}
	if b.mark != nil {
		b.mark.Destroy()
	}
	if b.main != nil {
		b.main.Destroy()
	}
	for _, m := range b.modules {
		m.Unload()
	}
	b.freeMoE()
	if b.mail.free != nil {
		b.mail.free()
		b.mail = mailbox{} // its words are freed: nothing may read them after Close
	}
	if b.dev != nil {
		b.dev.Release()
	}
	return nil
}

// ownBlocks reads EnvCopyOwn: the blocks of the kernel that copies a copy-engine
// collective's own part (0: its own grid), or -1 for the copy engine.
func ownBlocks(v string) (int, error) {
	switch {
	case v == "":
		return ownDefault, nil
	case v == "copy":
		return -1, nil
	case v == "sm":
		return 0, nil
	}
	if k, err := strconv.Atoi(strings.TrimPrefix(v, "sm:")); err == nil && k > 0 && k <= MaxCollBlocks && strings.HasPrefix(v, "sm:") {
		return k, nil
	}
	return 0, fmt.Errorf("%s=%q: use copy (the copy engine), sm (the sm_store kernel) or sm:K (the kernel with K blocks, 1 to %d), or leave it unset", EnvCopyOwn, v, MaxCollBlocks)
}

// nvlinkEverywhere returns the probe ensureSync runs once on every rank: whether every
// rank's GPU has an active NVLink (NVML), agreed through kv (allAgree) so that every
// rank decides alike. LL128 relies on a warp's 128-byte store arriving whole, which
// NVLink keeps and PCIe does not promise (NCCL turns its LL128 off there too); a GPU
// whose NVML cannot be read counts as without.
func nvlinkEverywhere(ctx context.Context, p Place, kv KV, busID string) func() (bool, error) {
	return func() (bool, error) {
		mine := false
		if c, err := topo.OpenCounters(topo.SystemNVML(), busID); err == nil {
			c.Close()
			mine = true
		}
		return allAgree(ctx, p, kv, "gpu/nvlink", mine)
	}
}

// allAgree publishes mine under key/RANK in kv and says whether every rank of the job
// published true (waiting for each rank's answer).
func allAgree(ctx context.Context, p Place, kv KV, key string, mine bool) (bool, error) {
	v := []byte{'0'}
	if mine {
		v[0] = '1'
	}
	if err := kv.Set(ctx, fmt.Sprintf("%s/%d", key, p.Rank), v); err != nil {
		return false, err
	}
	all := true
	for r := range p.Size {
		got, err := kv.Get(ctx, fmt.Sprintf("%s/%d", key, r))
		if err != nil {
			return false, fmt.Errorf("rank %d's answer to %s: %w", r, key, err)
		}
		all = all && string(got) == "1"
	}
	return all, nil
}

// FewDevices marks e as a machine with too few GPUs (backend.FewDevices).
func (e *FewGPUsError) FewDevices() bool { return true }
