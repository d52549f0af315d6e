package gpu

import (
	"time"

	"github.com/symmem/symmem/internal/cuda"
	"github.com/symmem/symmem/pkg/nvshmem"
)

// The backend reaches the CUDA driver and the NVSHMEM host library only through the
// interfaces below, so that its own logic (lanes, timing, waits, addresses, the choice
// of kernels) runs against a fake device in plain `go test` on a machine without a GPU.
// Open wires them to internal/cuda and pkg/nvshmem; fake_test.go to an imitation
// that keeps each rank's heap in host memory.

// device is one GPU's primary context, current on the rank's locked thread.
type device interface {
	NewStream() (stream, error)
	// NewEvent makes an event that can time; NewSyncEvent one that only orders streams,
	// which is cheaper to record.
	NewEvent() (event, error)
	NewSyncEvent() (event, error)
	LoadModule(image []byte) (module, error)
	// LinkModule compiles relocatable PTX, links it with the device libraries at the
	// paths libs and loads the result; name names the PTX in the linker's messages.
	LinkModule(ptx []byte, name string, libs []string) (module, error)
	CopyHtoD(dst uint64, src []byte) error
	CopyDtoH(dst []byte, src uint64) error
	// Zero sets n bytes from dst to zero and returns once they are.
	Zero(dst, n uint64) error
	// MapHostWords is n words of pinned host memory the GPU writes through dev: where
	// kernels leave what the host must read even after they trapped (the mailbox).
	MapHostWords(n int) (dev uint64, words []uint64, free func() error, err error)
	// Alloc is n bytes of this GPU's memory outside the symmetric heap, which no peer
	// reaches (the MoE kernels' tables); FreeMem frees it.
	Alloc(n uint64) (uint64, error)
	FreeMem(p uint64) error
	Release() error
}

// stream is a queue of work on the GPU.
type stream interface {
	Synchronize() error
	// Wait makes work queued on the stream later wait for e.
	Wait(e event) error
	CopyDtoDAsync(dst, src, n uint64) error
	// Capture records what fill queues (on this stream and on streams that join it)
	// into a graph instead of running it.
	Capture(fill func() error) (graph, error)
	Destroy() error
}

// event marks a point in a stream.
type event interface {
	Record(s stream) error
	// Since waits for the event and returns the milliseconds from start to it.
	Since(start event) (float32, error)
	// WaitFor waits up to limit; done is false when the work before the event is still
	// running then.
	WaitFor(limit time.Duration) (done bool, err error)
	Destroy() error
}

// graph is captured work, launched as one.
type graph interface {
	Upload(s stream) error
	Launch(s stream) error
	Destroy()
}

// module is a loaded cubin or PTX image.
type module interface {
	Function(entry string) (function, error)
	Unload() error
}

// function is a kernel entry point; args holds one 64-bit slot per parameter
// (kernels.Artifact.Args).
type function interface {
	Launch(s stream, dim cuda.Dim, args []uint64, cooperative bool) error
}

// shmem is the NVSHMEM host library: the team, the symmetric heap, and the operations
// queued on a stream.
type shmem interface {
	NewUID() (nvshmem.UID, error)
	Init(rank, n int, uid nvshmem.UID) error
	Malloc(n uint64) (uintptr, error)
	Free(p uintptr)
	// PeerPtr is nvshmem_ptr: where this rank reaches p on pe with plain loads and
	// stores, or 0 when no NVLink or PCIe P2P path maps it.
	PeerPtr(p uintptr, pe int) uintptr
	QuietOnStream(s stream)
	BarrierOnStream(s stream)
	BarrierAll()
	// ModuleInit gives a module that calls NVSHMEM device functions its device state.
	ModuleInit(m module) error
	ModuleFinalize(m module)
	Finalize()
	HostVersion() [3]int
	VersionString() string
}

// The production adapters. A stream, event, graph or module only ever meets others
// made by the same device, so the type assertions below hold by construction.

type cudaDevice struct{ c *cuda.Context }

func (d cudaDevice) NewStream() (stream, error) {
	s, err := d.c.NewStream()
	if err != nil {
		return nil, err
	}
	return cudaStream{s}, nil
}

func (d cudaDevice) NewEvent() (event, error) { return wrapEvent(d.c.NewEvent()) }

func (d cudaDevice) NewSyncEvent() (event, error) { return wrapEvent(d.c.NewSyncEvent()) }

func wrapEvent(e *cuda.Event, err error) (event, error) {
	if err != nil {
		return nil, err
	}
	return cudaEvent{e}, nil
}

func (d cudaDevice) LoadModule(image []byte) (module, error) {
	return wrapModule(d.c.LoadModule(image))
}

func (d cudaDevice) LinkModule(ptx []byte, name string, libs []string) (module, error) {
	return wrapModule(d.c.LinkModule(ptx, name, libs))
}

func wrapModule(m *cuda.Module, err error) (module, error) {
	if err != nil {
		return nil, err
	}
	return cudaModule{m}, nil
}

func (d cudaDevice) CopyHtoD(dst uint64, src []byte) error { return d.c.CopyHtoD(cuda.Ptr(dst), src) }
func (d cudaDevice) Zero(dst, n uint64) error              { return d.c.Zero(cuda.Ptr(dst), n) }
func (d cudaDevice) CopyDtoH(dst []byte, src uint64) error { return d.c.CopyDtoH(dst, cuda.Ptr(src)) }
func (d cudaDevice) Release() error                        { return d.c.Release() }

func (d cudaDevice) MapHostWords(n int) (uint64, []uint64, func() error, error) {
	h, err := d.c.MapHostWords(n)
	if err != nil {
		return 0, nil, nil, err
	}
	return uint64(h.Dev), h.Words, h.Free, nil
}

func (d cudaDevice) Alloc(n uint64) (uint64, error) {
	p, err := d.c.Alloc(n)
	return uint64(p), err
}

func (d cudaDevice) FreeMem(p uint64) error { return d.c.Free(cuda.Ptr(p)) }

type cudaStream struct{ *cuda.Stream }

func (s cudaStream) Wait(e event) error { return s.Stream.Wait(e.(cudaEvent).Event) }

func (s cudaStream) CopyDtoDAsync(dst, src, n uint64) error {
	return s.Stream.CopyDtoDAsync(cuda.Ptr(dst), cuda.Ptr(src), n)
}

func (s cudaStream) Capture(fill func() error) (graph, error) {
	g, err := s.Stream.Capture(fill)
	if err != nil {
		return nil, err
	}
	return cudaGraph{g}, nil
}

type cudaEvent struct{ *cuda.Event }

func (e cudaEvent) Record(s stream) error { return e.Event.Record(s.(cudaStream).Stream) }

func (e cudaEvent) Since(start event) (float32, error) { return e.Event.Since(start.(cudaEvent).Event) }

type cudaGraph struct{ *cuda.Graph }

func (g cudaGraph) Upload(s stream) error { return g.Graph.Upload(s.(cudaStream).Stream) }
func (g cudaGraph) Launch(s stream) error { return g.Graph.Launch(s.(cudaStream).Stream) }

type cudaModule struct{ *cuda.Module }

func (m cudaModule) Function(entry string) (function, error) {
	f, err := m.Module.Function(entry)
	if err != nil {
		return nil, err
	}
	return cudaFunction{f}, nil
}

type cudaFunction struct{ *cuda.Function }

func (f cudaFunction) Launch(s stream, dim cuda.Dim, args []uint64, cooperative bool) error {
	return f.Function.Launch(s.(cudaStream).Stream, dim, args, cooperative)
}

type nvshmemLib struct{ *nvshmem.Lib }

func (l nvshmemLib) QuietOnStream(s stream)    { l.Lib.QuietOnStream(s.(cudaStream).H) }
func (l nvshmemLib) BarrierOnStream(s stream)  { l.Lib.BarrierOnStream(s.(cudaStream).H) }
func (l nvshmemLib) ModuleInit(m module) error { return l.Lib.ModuleInit(m.(cudaModule).H) }
func (l nvshmemLib) ModuleFinalize(m module)   { l.Lib.ModuleFinalize(m.(cudaModule).H) }
func (l nvshmemLib) HostVersion() [3]int       { return l.Version }
