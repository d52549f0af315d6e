package cuda

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/symmem/symmem/internal/dl"
)

// Stream is a CUDA stream.
type Stream struct {
	c *Context
	H uintptr
}

// NewStream creates a stream.
func (c *Context) NewStream() (*Stream, error) {
	s := &Stream{c: c}
	return s, c.d.check("cuStreamCreate", c.d.cuStreamCreate(&s.H, 0))
}

// Synchronize waits for the stream.
func (s *Stream) Synchronize() error {
	return s.c.d.check("cuStreamSynchronize", s.c.d.cuStreamSynchronize(s.H))
}

// Wait makes later work on s wait for e.
func (s *Stream) Wait(e *Event) error {
	return s.c.d.check("cuStreamWaitEvent", dl.Call(s.c.d.fast.streamWaitEvent, s.H, e.H, 0))
}

// Destroy frees the stream.
func (s *Stream) Destroy() error { return s.c.d.check("cuStreamDestroy", s.c.d.cuStreamDestroy(s.H)) }

// CopyDtoDAsync enqueues a device-to-device copy (the copy engine; dst may be a peer's
// mapping).
func (s *Stream) CopyDtoDAsync(dst, src Ptr, n uint64) error {
	return s.c.d.check("cuMemcpyDtoDAsync", dl.Call(s.c.d.fast.memcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), s.H))
}

// Graph is an instantiated CUDA graph: work captured from streams, launched as one.
type Graph struct {
	c       *Context
	g, exec uintptr
}

// Capture records the work that fill queues on s (and on streams that join s through
// events) into a graph, instead of running it, and instantiates that graph.
func (s *Stream) Capture(fill func() error) (*Graph, error) {
	d := s.c.d
	const relaxed = 2 // CU_STREAM_CAPTURE_MODE_RELAXED: other threads' calls are not checked
	if err := d.check("cuStreamBeginCapture", d.cuStreamBeginCapture(s.H, relaxed)); err != nil {
		return nil, err
	}
	ferr := fill()
	var g uintptr
	if err := d.check("cuStreamEndCapture", d.cuStreamEndCapture(s.H, &g)); err != nil {
		if ferr != nil {
			return nil, ferr
		}
		return nil, err
	}
	if ferr != nil {
		d.cuGraphDestroy(g)
		return nil, ferr
	}
	gr := &Graph{c: s.c, g: g}
	if err := d.check("cuGraphInstantiate", d.cuGraphInstantiate(&gr.exec, g, 0)); err != nil {
		d.cuGraphDestroy(g)
		return nil, err
	}
	return gr, nil
}

// Upload prepares the graph's launch on s ahead of time, so that the first launch does
// not pay for it.
func (g *Graph) Upload(s *Stream) error {
	return g.c.d.check("cuGraphUpload", g.c.d.cuGraphUpload(g.exec, s.H))
}

// Launch enqueues the whole graph on s.
func (g *Graph) Launch(s *Stream) error {
	return g.c.d.check("cuGraphLaunch", dl.Call(g.c.d.fast.graphLaunch, g.exec, s.H))
}

// Destroy frees the graph.
func (g *Graph) Destroy() {
	g.c.d.cuGraphExecDestroy(g.exec)
	g.c.d.cuGraphDestroy(g.g)
}

// Event is a CUDA event for timing.
type Event struct {
	c *Context
	H uintptr
}

// NewEvent creates a timing event.
func (c *Context) NewEvent() (*Event, error) {
	e := &Event{c: c}
	return e, c.d.check("cuEventCreate", c.d.cuEventCreate(&e.H, 0))
}

// NewSyncEvent creates an event for ordering streams only (no timing: cheaper).
func (c *Context) NewSyncEvent() (*Event, error) {
	e := &Event{c: c}
	const disableTiming = 0x2
	return e, c.d.check("cuEventCreate", c.d.cuEventCreate(&e.H, disableTiming))
}

// Record enqueues the event on s.
func (e *Event) Record(s *Stream) error {
	return e.c.d.check("cuEventRecord", dl.Call(e.c.d.fast.eventRecord, e.H, s.H))
}

// Since waits for e and returns the milliseconds from start to e.
func (e *Event) Since(start *Event) (float32, error) {
	if err := e.c.d.check("cuEventSynchronize", e.c.d.cuEventSynchronize(e.H)); err != nil {
		return 0, err
	}
	var ms float32
	return ms, e.c.d.check("cuEventElapsedTime", e.c.d.cuEventElapsedTime(&ms, start.H, e.H))
}

// errNotReady is CUDA_ERROR_NOT_READY: the work before the event is still running.
const errNotReady = 600

// WaitFor waits for the work before e, up to limit; done is false when the limit ran
// out first (the work is then still on the device).
func (e *Event) WaitFor(limit time.Duration) (done bool, err error) {
	deadline := time.Now().Add(limit)
	pause := 2 * time.Microsecond
	for {
		switch code := e.c.d.cuEventQuery(e.H); code {
		case 0:
			return true, nil
		case errNotReady:
		default:
			return false, e.c.d.check("cuEventQuery", code)
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		time.Sleep(pause)
		pause = min(pause*2, time.Millisecond)
	}
}

// Destroy frees the event.
func (e *Event) Destroy() error { return e.c.d.check("cuEventDestroy", e.c.d.cuEventDestroy(e.H)) }

// Module is a loaded cubin or PTX image.
type Module struct {
	c *Context
	H uintptr
}

// LoadModule loads a cubin or NUL-terminated PTX image.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	m := &Module{c: c}
	return m, c.d.check("cuModuleLoadData", c.d.cuModuleLoadData(&m.H, unsafe.Pointer(&image[0])))
}

// The JIT options and input kinds LinkModule passes (CUjit_option, CUjitInputType).
const (
	jitErrorLogBuffer     = 5
	jitErrorLogBufferSize = 6
	jitInputPTX           = 1
	jitInputLibrary       = 4
)

// LinkModule compiles relocatable PTX (NUL-terminated) for this GPU, links it with
// libs (archives of objects with device code, such as NVSHMEM's libnvshmem_device.a)
// and loads the result: what nvcc -dlink does at build time, done by the driver at
// load, so that PTX calling a device library runs on a GPU no cubin was built for.
// A failed link's error carries the linker's log.
func (c *Context) LinkModule(ptx []byte, name string, libs []string) (*Module, error) {
	d := c.d
	errLog := make([]byte, 8192)
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSize}
	// Each option's value is a void*: the buffer's address, then its size as a pointer.
	vals := []uintptr{uintptr(unsafe.Pointer(&errLog[0])), uintptr(len(errLog))}
	var pin runtime.Pinner
	pin.Pin(&errLog[0])
	pin.Pin(&opts[0])
	pin.Pin(&vals[0])
	defer pin.Unpin()
	var state uintptr
	if err := d.check("cuLinkCreate", d.cuLinkCreate(uint32(len(opts)), &opts[0], &vals[0], &state)); err != nil {
		return nil, err
	}
	defer d.cuLinkDestroy(state)
	withLog := func(err error) error {
		if msg := strings.TrimSpace(dl.GoString(&errLog[0])); msg != "" {
			return fmt.Errorf("%w: %s", err, msg)
		}
		return err
	}
	if err := d.check("cuLinkAddData("+name+")", d.cuLinkAddData(state, jitInputPTX, unsafe.Pointer(&ptx[0]), uint64(len(ptx)), name, 0, nil, nil)); err != nil {
		return nil, withLog(err)
	}
	for _, l := range libs {
		if err := d.check("cuLinkAddFile("+l+")", d.cuLinkAddFile(state, jitInputLibrary, l, 0, nil, nil)); err != nil {
			return nil, withLog(err)
		}
	}
	var image unsafe.Pointer
	var size uint64
	if err := d.check("cuLinkComplete", d.cuLinkComplete(state, &image, &size)); err != nil {
		return nil, withLog(err)
	}
	// The image belongs to the link state until cuLinkDestroy: load it before then.
	m := &Module{c: c}
	return m, d.check("cuModuleLoadData", d.cuModuleLoadData(&m.H, image))
}

// Function looks up an entry point.
func (m *Module) Function(name string) (*Function, error) {
	f := &Function{c: m.c, Name: name}
	if err := m.c.d.check("cuModuleGetFunction("+name+")", m.c.d.cuModuleGetFunction(&f.H, m.H, name)); err != nil {
		return nil, err
	}
	return f, nil
}

// Unload frees the module.
func (m *Module) Unload() error { return m.c.d.check("cuModuleUnload", m.c.d.cuModuleUnload(m.H)) }

// Function is a kernel entry point.
type Function struct {
	c    *Context
	H    uintptr
	Name string

	mu    sync.Mutex
	slots *paramSlots // the launch's parameters, reused from launch to launch
	// shared is the dynamic shared memory the function may take (raised by Launch past
	// the driver's default of 48 KiB, as a matrix product's tiles need).
	shared uint32
}

// defaultShared is the dynamic shared memory a kernel may take without asking
// (cuFuncSetAttribute): 48 KiB on every GPU since sm_70.
const defaultShared = 48 << 10

// attrMaxDynamicShared is CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
const attrMaxDynamicShared = 8

// maxParams bounds a kernel's parameters (Triton's kernels here take up to ~20).
const maxParams = 64

// paramSlots is cuLaunchKernel's kernelParams: ptrs[i] points at vals[i]. One heap
// object, pinned during a launch, so that the driver reads it in place (Go's heap does
// not move objects; the pin makes passing it to C legitimate).
type paramSlots struct {
	vals [maxParams]uint64
	ptrs [maxParams]unsafe.Pointer
	call [11]uintptr // cuLaunchKernel's own arguments (cuLaunchCooperativeKernel's: the first ten)
}

// Dim is a launch shape: Grid blocks along x (and GridY along y; 0 is 1) of Block
// threads, with Shared bytes of dynamic shared memory.
type Dim struct{ Grid, GridY, Block, Shared uint32 }

// Launch enqueues the kernel on s with one 64-bit slot per parameter, in order (as
// kernels.Artifact.Args packs them); cooperative launches guarantee that all blocks are
// resident at once. A 4-byte parameter reads the low half of its slot: the host is
// little-endian, so that is the value itself. A launch reuses its parameter block and
// calls the driver directly (dl.Call), allocating nothing: launched one by one, small
// collectives are bound by the host's time per launch.
func (f *Function) Launch(s *Stream, dim Dim, args []uint64, cooperative bool) error {
	if len(args) > maxParams {
		return fmt.Errorf("launching kernel %s: %d parameters, at most %d", f.Name, len(args), maxParams)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if dim.Shared > defaultShared && dim.Shared > f.shared {
		if err := f.c.d.check("cuFuncSetAttribute", f.c.d.cuFuncSetAttribute(f.H, attrMaxDynamicShared, int32(dim.Shared))); err != nil {
			return fmt.Errorf("launching kernel %s with %d bytes of shared memory: %w", f.Name, dim.Shared, err)
		}
		f.shared = dim.Shared
	}
	p := f.slots
	if p == nil {
		p = new(paramSlots)
		for i := range p.vals {
			p.ptrs[i] = unsafe.Pointer(&p.vals[i])
		}
		f.slots = p
	}
	copy(p.vals[:], args)
	var pin runtime.Pinner
	pin.Pin(p)
	// cuLaunchCooperativeKernel takes cuLaunchKernel's arguments but the last (extra).
	p.call = [11]uintptr{f.H, uintptr(dim.Grid), uintptr(max(dim.GridY, 1)), 1, uintptr(dim.Block), 1, 1, uintptr(dim.Shared), s.H,
		uintptr(unsafe.Pointer(&p.ptrs[0])), 0}
	var code int32
	call := "cuLaunchKernel"
	if cooperative {
		call = "cuLaunchCooperativeKernel"
		code = dl.Call(f.c.d.fast.launchCooperative, p.call[:10]...)
	} else {
		code = dl.Call(f.c.d.fast.launchKernel, p.call[:]...)
	}
	pin.Unpin()
	if code != 0 {
		err := f.c.d.check(call, code).(*Error)
		err.Call = fmt.Sprintf("launching kernel %s (grid %d, block %d)", f.Name, dim.Grid, dim.Block)
		return err
	}
	return nil
}
