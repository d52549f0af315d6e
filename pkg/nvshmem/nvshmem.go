package nvshmem

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/symmem/symmem/internal/dl"
)

// LibName is the host library's soname.
const LibName = "libnvshmem_host.so.3"

// Search is where Find looked, in order, and what it found.
type Search struct {
	Tried  []string // every candidate path, in order
	Chosen string
}

// Candidates lists the places to look for the host library, most specific first:
// an explicit path, NVSHMEM_HOME, NVSHMEM_LIB_DIR, the pip wheel (nvidia/nvshmem/lib)
// of the python3 on PATH and of common virtual environments, the system locations,
// and last the bare soname for the dynamic loader's own path.
func Candidates(explicit string) []string {
	var c []string
	add := func(p string) {
		for _, q := range c {
			if q == p {
				return
			}
		}
		c = append(c, p)
	}
	if explicit != "" {
		if st, err := os.Stat(explicit); err == nil && st.IsDir() {
			explicit = filepath.Join(explicit, LibName)
		}
		add(explicit)
	}
	if h := os.Getenv("NVSHMEM_HOME"); h != "" {
		add(filepath.Join(h, "lib", LibName))
		add(filepath.Join(h, "lib64", LibName))
	}
	if d := os.Getenv("NVSHMEM_LIB_DIR"); d != "" {
		add(filepath.Join(d, LibName))
	}
	for _, m := range dl.WheelLibs("nvshmem", LibName) {
		add(m)
	}
	for _, p := range []string{"/usr/local/nvshmem/lib", "/opt/nvidia/nvshmem/lib", "/usr/lib/x86_64-linux-gnu/nvshmem/13",
		"/usr/lib/x86_64-linux-gnu/nvshmem/12", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/lib"} {
		add(filepath.Join(p, LibName))
	}
	add(LibName)
	return c
}

// Find returns the first candidate that exists (the bare soname is left to dlopen). An
// explicit path is the only candidate: a wrong one is an error, not a reason to pick
// some other library.
func Find(explicit string) Search {
	s := Search{}
	if explicit != "" {
		c := Candidates(explicit)[0]
		s.Tried = []string{c}
		if _, err := os.Stat(c); err == nil {
			s.Chosen = c
		}
		return s
	}
	for _, c := range Candidates(explicit) {
		s.Tried = append(s.Tried, c)
		if !strings.Contains(c, "/") {
			s.Chosen = c
			return s
		}
		if strings.Contains(c, "python3.X") {
			continue
		}
		if _, err := os.Stat(c); err == nil {
			s.Chosen = c
			return s
		}
	}
	return s
}

// Loadable reports whether the dynamic loader finds the bare soname.
func Loadable() bool {
	_, err := dl.Open(LibName)
	return err == nil
}

// InstallHint says how to get NVSHMEM where Find looks for it.
const InstallHint = "install it with `pip install nvidia-nvshmem-cu13` (or -cu12), or from NVIDIA's NVSHMEM packages, then point NVSHMEM_HOME at it"

// InstallHintFor is InstallHint for a program that also takes the library's path in
// settings of its own (the path it passes to Find): it says to point program at the
// library with those settings or NVSHMEM_HOME.
func InstallHintFor(program, settings string) string {
	return "install it with `pip install nvidia-nvshmem-cu13` (or -cu12), or from NVIDIA's NVSHMEM packages, then point " +
		program + " at it with " + settings + " or NVSHMEM_HOME"
}

// UID is nvshmemx_uniqueid_t: 128 opaque bytes, the first int32 a version field.
type UID [128]byte

// attr is nvshmemx_init_attr_t (144 bytes).
type attr [144]byte

// Lib is the opened host library. Its methods are thin: each calls the NVSHMEM
// function of the same name and turns a failure into an error.
type Lib struct {
	Path    string
	Version Version

	getUniqueID      func(uid *UID) int32
	setAttrUID       func(rank, n int32, uid *UID, a *attr) int32
	hostlibInitAttr  func(flags uint32, a *attr) int32
	hostlibFinalize  func()
	initStatus       func() int32
	malloc           func(n uint64) uintptr
	free             func(p uintptr)
	ptr              func(p uintptr, pe int32) uintptr
	myPE             func() int32
	nPEs             func() int32
	barrierAll       func()
	barrierOnStream  func(s uintptr)
	quietOnStream    func(s uintptr)
	cumoduleInit     func(m uintptr) int32
	cumoduleFinalize func(m uintptr) int32
	vendorVersion    func(major, minor, patch *int32)

	// uid and attr must stay at one address across init: NVSHMEM keeps a pointer.
	pin  runtime.Pinner
	uid  *UID
	attr *attr
}

// Open loads the library at path (Search.Chosen) and reads its version. Every symbol
// it needs is looked up here: a library without one is an error naming it, never a
// crash at the first call.
func Open(path string) (*Lib, error) {
	lib, err := dl.Open(path)
	if err != nil {
		return nil, err
	}
	l := &Lib{Path: lib.Path} // for a bare soname, the file the loader chose
	b := func(fn any, names ...string) dl.Binding { return dl.Binding{Fn: fn, Names: names} }
	if err := lib.BindAll([]dl.Binding{
		b(&l.getUniqueID, "nvshmemx_get_uniqueid"),
		b(&l.setAttrUID, "nvshmemx_set_attr_uniqueid_args"),
		b(&l.hostlibInitAttr, "nvshmemx_hostlib_init_attr"),
		b(&l.hostlibFinalize, "nvshmemx_hostlib_finalize"),
		b(&l.initStatus, "nvshmemx_init_status"),
		b(&l.malloc, "nvshmem_malloc"),
		b(&l.free, "nvshmem_free"),
		b(&l.ptr, "nvshmem_ptr"),
		b(&l.myPE, "nvshmem_my_pe"),
		b(&l.nPEs, "nvshmem_n_pes"),
		b(&l.barrierAll, "nvshmem_barrier_all"),
		b(&l.barrierOnStream, "nvshmemx_barrier_all_on_stream"),
		b(&l.quietOnStream, "nvshmemx_quiet_on_stream"),
		b(&l.cumoduleInit, "nvshmemx_cumodule_init"),
		b(&l.cumoduleFinalize, "nvshmemx_cumodule_finalize"),
		b(&l.vendorVersion, "nvshmemx_vendor_get_version_info"),
	}); err != nil {
		return nil, err
	}
	var ma, mi, pa int32
	l.vendorVersion(&ma, &mi, &pa)
	l.Version = Version{int(ma), int(mi), int(pa)}
	return l, nil
}

// VersionString is "3.4.5".
func (l *Lib) VersionString() string { return l.Version.String() }

// NewUID makes a unique ID (rank 0 does this and shares it through the store).
func (l *Lib) NewUID() (UID, error) {
	var u UID
	*(*int32)(unsafe.Pointer(&u[0])) = 1<<16 + 128 // NVSHMEMX_UNIQUEID_VERSION
	if rc := l.getUniqueID(&u); rc != 0 {
		return u, fmt.Errorf("nvshmemx_get_uniqueid returned %d", rc)
	}
	return u, nil
}

// NVSHMEM's nvshmemx_init_status values: IS_INITIALIZED, and LIMITED_MPG and FULL_MPG,
// initialised with more than one PE on a GPU (multiple processes per GPU).
const (
	statusInitialized = 2
	statusLimitedMPG  = 3
	statusFullMPG     = 4
)

// EnvMPG, "1", lets a test run ranks that share a GPU in NVSHMEM's
// multiple-processes-per-GPU mode: to run the kernels' logic on real hardware where one
// GPU is lent. Their times mean nothing there (the ranks' kernels take turns on the GPU).
const EnvMPG = "SYMMEM_TEST_MPG"

// statusError says why an init that ended in status st is of no use here (nil: it is,
// an init with ranks sharing a GPU included where mpg allows it).
func statusError(st int32, mpg bool) error {
	if st == statusInitialized {
		return nil
	}
	if st == statusLimitedMPG || st == statusFullMPG {
		if mpg {
			return nil
		}
		return fmt.Errorf("NVSHMEM put more than one rank on this GPU (its multiple-processes-per-GPU mode, status %d): symmem runs one rank per GPU; give each rank a GPU of its own (the launcher's local rank picks it)", st)
	}
	return fmt.Errorf("NVSHMEM did not initialise (status %d; set NVSHMEM_DEBUG=WARN for its reason)", st)
}

// Init joins the team as rank of n, bootstrapped from uid. The CUDA context of the
// rank's GPU must be current on the calling thread. If it fails it unpins what it
// pinned: a Pinner collected with pointers pinned makes the Go runtime panic, which
// turned a refused init (two ranks on one GPU) into a stack trace.
func (l *Lib) Init(rank, n int, uid UID) (err error) {
	l.uid, l.attr = new(UID), new(attr)
	*l.uid = uid
	l.pin.Pin(l.uid)
	l.pin.Pin(l.attr)
	defer func() {
		if err != nil {
			l.pin.Unpin()
		}
	}()
	a := l.attr
	*(*int32)(unsafe.Pointer(&a[0])) = 65680  // NVSHMEMX_INIT_ATTR_VERSION
	*(*int32)(unsafe.Pointer(&a[16])) = 65664 // uniqueid args version
	*(*int32)(unsafe.Pointer(&a[24])) = 65560 // init args version
	if rc := l.setAttrUID(int32(rank), int32(n), l.uid, l.attr); rc != 0 {
		return fmt.Errorf("nvshmemx_set_attr_uniqueid_args(rank %d of %d) returned %d", rank, n, rc)
	}
	const initWithUniqueID = 8
	if rc := l.hostlibInitAttr(initWithUniqueID, l.attr); rc != 0 {
		return fmt.Errorf("nvshmemx_hostlib_init_attr returned %d (set NVSHMEM_DEBUG=WARN for NVSHMEM's own reason)", rc)
	}
	if err := statusError(l.initStatus(), os.Getenv(EnvMPG) == "1"); err != nil {
		return err
	}
	if pe, np := l.myPE(), l.nPEs(); int(pe) != rank || int(np) != n {
		return fmt.Errorf("NVSHMEM placed this process at PE %d of %d, expected %d of %d", pe, np, rank, n)
	}
	return nil
}

// Finalize leaves the team.
func (l *Lib) Finalize() {
	l.hostlibFinalize()
	l.pin.Unpin()
}

// Malloc allocates n bytes of symmetric memory (collective: every PE calls it).
func (l *Lib) Malloc(n uint64) (uintptr, error) {
	p := l.malloc(n)
	if p == 0 {
		return 0, fmt.Errorf("nvshmem_malloc(%d bytes) failed: the symmetric heap is too small (NVSHMEM_SYMMETRIC_SIZE) or the GPU is out of memory", n)
	}
	return p, nil
}

// Free releases symmetric memory (collective).
func (l *Lib) Free(p uintptr) { l.free(p) }

// PeerPtr is nvshmem_ptr: the address at which this PE can reach p on pe directly
// (NVLink or PCIe P2P), or 0.
func (l *Lib) PeerPtr(p uintptr, pe int) uintptr { return l.ptr(p, int32(pe)) }

// BarrierAll is nvshmem_barrier_all.
func (l *Lib) BarrierAll() { l.barrierAll() }

// BarrierOnStream enqueues a barrier on a CUDA stream.
func (l *Lib) BarrierOnStream(stream uintptr) { l.barrierOnStream(stream) }

// QuietOnStream enqueues a quiet on a CUDA stream.
func (l *Lib) QuietOnStream(stream uintptr) { l.quietOnStream(stream) }

// ModuleInit registers a loaded module's NVSHMEM device state.
func (l *Lib) ModuleInit(module uintptr) error {
	if rc := l.cumoduleInit(module); rc != 0 {
		return fmt.Errorf("nvshmemx_cumodule_init returned %d", rc)
	}
	return nil
}

// ModuleFinalize undoes ModuleInit.
func (l *Lib) ModuleFinalize(module uintptr) { l.cumoduleFinalize(module) }

// Room is what the symmetric heap holds past the job's heap: the sync area of
// symmem's collective kernels (at most 118 MiB on 8 ranks) and NVSHMEM's own
// symmetric objects (signal words, barrier state), which it allocates from the
// same heap.
const Room = 160 << 20

// SymmetricSize is the NVSHMEM_SYMMETRIC_SIZE a job of heap bytes per rank needs: the
// heap plus Room, rounded up to a multiple of 2 MiB. The launcher, a rank under an
// external launcher and `symmem check` all size it here.
func SymmetricSize(heap int64) int64 {
	const unit = 2 << 20
	return (heap + Room + unit - 1) / unit * unit
}
