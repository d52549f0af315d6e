package gpu

import (
	"github.com/symmem/symmem/internal/nccl"
	"github.com/symmem/symmem/internal/setting"
)

// NCCL's symmetric-memory paths (nccl-symm: its host collectives on registered windows;
// nccl-device: kernels of symmem's own calling NCCL's device API) work on memory that
// NCCL allocated (ncclMemAlloc) and every rank registered as a window, not on NVSHMEM's
// heap. The backend keeps one window as large as the heap, offset for offset, and moves
// the buffers' home between the two: while an NCCL window implementation runs, every
// buffer (Write, Read, the operations' addresses) is in the window; any other
// implementation moves them back. A move copies the heap's bytes across, so nothing
// written before is lost; it happens in Preload (bench and run call it on every rank
// before the measurement's barrier), outside any timing.

// The NCCL window implementations' names in the registry.
const (
	implNCCLSymm   = "nccl-symm"
	implNCCLDevice = "nccl-device"
)

// windowComm is what the window implementations need of a communicator beyond comm.
type windowComm interface {
	comm
	// Serves says whether the library can run impl: nil, or why not (too old, or a
	// symbol missing), naming the NCCL release needed.
	Serves(impl string) error
	// Window allocates n bytes with ncclMemAlloc and registers them as a symmetric
	// window (collective: every rank, the same n).
	Window(n int64) (ncclWindow, error)
	// DevComm makes a device communicator with lsaBarriers LSA barriers (collective).
	DevComm(lsaBarriers int) (devComm, error)
}

// ncclWindow is a registered window: its memory, the ncclWindow_t that device code
// takes, and how to deregister and free it.
type ncclWindow struct {
	base, handle uint64
	free         func() error
}

// devComm is a device communicator: its bytes (ncclDevComm), this rank's place in the
// LSA team (the ranks it reaches by load and store), and how to destroy it.
type devComm struct {
	bytes            []byte
	lsaRank, lsaSize int
	destroy          func() error
}

// ncclSpace is the backend's NCCL window and what lives with it.
type ncclSpace struct {
	w  ncclWindow
	on bool // the buffers are in the window now
	// The device communicator (nccl-device), made on first use, and its bytes in this
	// GPU's memory, which the kernels read.
	dev    *devComm
	devMem uint64
}

// windows returns the job's window communicator, or why impl cannot run.
func (b *Backend) windows(impl string) (windowComm, error) {
	cm, err := b.communicator()
	if err != nil {
		return nil, err
	}
	wc, ok := cm.(windowComm)
	if !ok {
		return nil, setting.Errorf("%s %s: this NCCL communicator cannot register windows", setting.Impl, impl)
	}
	if err := wc.Serves(impl); err != nil {
		return nil, setting.Errorf("%s %s: %w", setting.Impl, impl, err)
	}
	return wc, nil
}

// useHome moves the buffers to where impl works (the window for the NCCL window
// implementations, the heap for the others), registering the window on first use.
func (b *Backend) useHome(impl string) error {
	want := windowImpl(impl)
	if want == (b.nwin != nil && b.nwin.on) {
		return nil
	}
	if b.nwin == nil {
		wc, err := b.windows(impl)
		if err != nil {
			return err
		}
		w, err := wc.Window(b.alloc.Limit)
		if err != nil {
			return setting.Errorf("%s %s: rank %d: %w", setting.Impl, impl, b.rank, err)
		}
		b.nwin = &ncclSpace{w: w}
	}
	if err := b.joinLanes(); err != nil {
		return err
	}
	from, to := uint64(b.base), b.nwin.w.base
	if !want {
		from, to = to, from
	}
	if err := b.main.CopyDtoDAsync(to, from, uint64(b.alloc.Limit)); err != nil {
		return b.explain(err)
	}
	// Every lane's next operation must see the copy complete.
	if err := b.main.Synchronize(); err != nil {
		return b.explain(err)
	}
	b.nwin.on = want
	return nil
}

// closeWindows frees the device communicator and the window (Close), before the
// communicator goes.
func (b *Backend) closeWindows() {
	if b.nwin == nil {
		return
	}
	if d := b.nwin.dev; d != nil {
		d.destroy()
	}
	if b.nwin.devMem != 0 {
		b.dev.FreeMem(b.nwin.devMem)
	}
	b.nwin.w.free()
	b.nwin = nil
}

// CheckNCCLImpls is the check run and bench make before they start ranks for the NCCL
// window implementations among impls: that the NCCL the ranks will find (lib: an
// explicit path, or "" to search) is new enough and exports the calls they make.
func CheckNCCLImpls(impls []string, lib string) error {
	var need []string
	for _, name := range impls {
		if windowImpl(name) {
			need = append(need, name)
		}
	}
	if len(need) == 0 {
		return nil
	}
	s := nccl.Find(lib)
	if s.Chosen == "" {
		return setting.Errorf("%s %s: libnccl.so.2 not found; %s", setting.Impl, need[0], nccl.InstallHint)
	}
	l, err := nccl.Open(s.Chosen)
	if err != nil {
		return setting.Errorf("%s %s: %v; %s", setting.Impl, need[0], err, nccl.InstallHint)
	}
	for _, name := range need {
		if err := serves(l, name); err != nil {
			return setting.Errorf("%s %s: %w", setting.Impl, name, err) // the library's errors name it
		}
	}
	return nil
}

// serves says whether l can run impl (its needs, where it has any).
func serves(l *nccl.Lib, impl string) error {
	if u, ok := named(impl).(ncclUser); ok {
		return u.needs(l)
	}
	return nil
}

func (n ncclComm) Serves(impl string) error { return serves(n.lib, impl) }

func (n ncclComm) Window(size int64) (ncclWindow, error) {
	p, err := n.lib.MemAlloc(int(size))
	if err != nil {
		return ncclWindow{}, err
	}
	w, err := n.c.RegisterWindow(p, int(size))
	if err != nil {
		n.lib.MemFree(p)
		return ncclWindow{}, err
	}
	free := func() error {
		err := w.Deregister()
		if e := n.lib.MemFree(p); err == nil {
			err = e
		}
		return err
	}
	return ncclWindow{base: uint64(p), handle: uint64(w.Handle()), free: free}, nil
}

func (n ncclComm) DevComm(lsaBarriers int) (devComm, error) {
	d, err := n.c.CreateDevComm(nccl.DevCommRequirements{LSABarrierCount: int32(lsaBarriers)})
	if err != nil {
		return devComm{}, err
	}
	rank, size := d.LSA()
	return devComm{bytes: d.Bytes[:], lsaRank: rank, lsaSize: size, destroy: d.Destroy}, nil
}
