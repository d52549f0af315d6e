// Package cuda is a small binding to the CUDA driver API (libcuda.so.1), opened at run
// time. It covers what symmem needs: devices and their attributes, the primary context,
// memory, streams, events, modules, kernel launches and peer access. Errors carry the
// driver's error name and text.
//
// CUDA contexts are per OS thread: callers lock their goroutine to its thread
// (runtime.LockOSThread) before the first call.
package cuda

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/symmem/symmem/internal/dl"
)

// Ptr is a device address.
type Ptr uintptr

// Error is a failed driver call.
type Error struct {
	Call string
	Code int32
	Name string
	Text string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%d): %s", e.Call, e.Name, e.Code, e.Text)
}

// Device attributes symmem reads (CUdevice_attribute values).
const (
	AttrSMCount     = 16
	AttrCCMajor     = 75
	AttrCCMinor     = 76
	AttrPCIBusID    = 33
	AttrPCIDeviceID = 34
	AttrPCIDomainID = 50
)

// Driver is the opened libcuda.
type Driver struct {
	lib *dl.Lib

	cuInit                     func(flags uint32) int32
	cuDriverGetVersion         func(v *int32) int32
	cuDeviceGetCount           func(n *int32) int32
	cuDeviceGet                func(d *int32, ordinal int32) int32
	cuDeviceGetName            func(name *byte, n int32, d int32) int32
	cuDeviceGetUuid            func(uuid *byte, d int32) int32 // optional: nil where the driver lacks it
	cuDeviceGetAttribute       func(v *int32, attr int32, d int32) int32
	cuDeviceTotalMem           func(b *uint64, d int32) int32
	cuDeviceCanAccessPeer      func(ok *int32, d, peer int32) int32
	cuDevicePrimaryCtxRetain   func(ctx *uintptr, d int32) int32
	cuDevicePrimaryCtxRelease  func(d int32) int32
	cuDevicePrimaryCtxSetFlags func(d int32, flags uint32) int32
	cuCtxSetCurrent            func(ctx uintptr) int32
	cuCtxSynchronize           func() int32
	cuMemAlloc                 func(p *Ptr, n uint64) int32
	cuMemFree                  func(p Ptr) int32
	cuMemcpyHtoD               func(dst Ptr, src unsafe.Pointer, n uint64) int32
	cuMemcpyDtoH               func(dst unsafe.Pointer, src Ptr, n uint64) int32
	cuMemHostAlloc             func(p *unsafe.Pointer, n uint64, flags uint32) int32
	cuMemHostGetDevicePointer  func(d *Ptr, p unsafe.Pointer, flags uint32) int32
	cuMemFreeHost              func(p unsafe.Pointer) int32
	cuStreamCreate             func(s *uintptr, flags uint32) int32
	cuStreamSynchronize        func(s uintptr) int32
	cuStreamDestroy            func(s uintptr) int32
	cuEventCreate              func(e *uintptr, flags uint32) int32
	cuEventSynchronize         func(e uintptr) int32
	cuEventQuery               func(e uintptr) int32
	cuEventElapsedTime         func(ms *float32, start, end uintptr) int32
	cuEventDestroy             func(e uintptr) int32
	cuModuleLoadData           func(m *uintptr, image unsafe.Pointer) int32
	cuModuleGetFunction        func(f *uintptr, m uintptr, name string) int32
	cuModuleUnload             func(m uintptr) int32
	cuLaunchCooperativeKernel  func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, s uintptr, params unsafe.Pointer) int32
	cuStreamBeginCapture       func(s uintptr, mode int32) int32
	cuStreamEndCapture         func(s uintptr, g *uintptr) int32
	cuGraphInstantiate         func(exec *uintptr, g uintptr, flags uint64) int32
	cuGraphUpload              func(exec, s uintptr) int32
	cuGraphExecDestroy         func(exec uintptr) int32
	cuGraphDestroy             func(g uintptr) int32
	cuGetErrorName             func(code int32, s **byte) int32
	cuGetErrorString           func(code int32, s **byte) int32

	// The calls made per operation, called through dl.Call rather than bound: a kernel
	// launch, a copy, the events and graph launches around them.
	fast struct{ launchKernel, memcpyDtoDAsync, eventRecord, streamWaitEvent, graphLaunch uintptr }
}

var (
	openOnce sync.Once
	driver   *Driver
	openErr  error
)

// LibName is the driver library dlopen looks for.
const LibName = "libcuda.so.1"

// Loadable reports whether the driver library can be opened, without initialising it.
func Loadable() error {
	if _, err := dl.Open(LibName); err != nil {
		return fmt.Errorf("NVIDIA driver not found (%v)", err)
	}
	return nil
}

// Open loads the driver once per process and calls cuInit.
func Open() (*Driver, error) {
	openOnce.Do(func() { driver, openErr = open() })
	return driver, openErr
}

func open() (*Driver, error) {
	lib, err := dl.Open(LibName)
	if err != nil {
		return nil, fmt.Errorf("NVIDIA driver not found (%v)", err)
	}
	d := &Driver{lib: lib}
	b := func(fn any, names ...string) dl.Binding { return dl.Binding{Fn: fn, Names: names} }
	if err := lib.BindAll([]dl.Binding{
		b(&d.cuInit, "cuInit"),
		b(&d.cuDriverGetVersion, "cuDriverGetVersion"),
		b(&d.cuDeviceGetCount, "cuDeviceGetCount"),
		b(&d.cuDeviceGet, "cuDeviceGet"),
		b(&d.cuDeviceGetName, "cuDeviceGetName"),
		b(&d.cuDeviceGetAttribute, "cuDeviceGetAttribute"),
		b(&d.cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
		b(&d.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer"),
		b(&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		b(&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
		b(&d.cuCtxSetCurrent, "cuCtxSetCurrent"),
		b(&d.cuCtxSynchronize, "cuCtxSynchronize"),
		b(&d.cuMemAlloc, "cuMemAlloc_v2"),
		b(&d.cuMemFree, "cuMemFree_v2"),
		b(&d.cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
		b(&d.cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
		b(&d.cuDevicePrimaryCtxSetFlags, "cuDevicePrimaryCtxSetFlags_v2", "cuDevicePrimaryCtxSetFlags"),
		b(&d.cuMemHostAlloc, "cuMemHostAlloc"),
		b(&d.cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
		b(&d.cuMemFreeHost, "cuMemFreeHost"),
		b(&d.cuStreamCreate, "cuStreamCreate"),
		b(&d.cuStreamSynchronize, "cuStreamSynchronize"),
		b(&d.cuStreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy"),
		b(&d.cuEventCreate, "cuEventCreate"),
		b(&d.cuEventSynchronize, "cuEventSynchronize"),
		b(&d.cuEventQuery, "cuEventQuery"),
		b(&d.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
		b(&d.cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy"),
		b(&d.cuModuleLoadData, "cuModuleLoadData"),
		b(&d.cuModuleGetFunction, "cuModuleGetFunction"),
		b(&d.cuModuleUnload, "cuModuleUnload"),
		b(&d.cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel"),
		b(&d.cuStreamBeginCapture, "cuStreamBeginCapture_v2"),
		b(&d.cuStreamEndCapture, "cuStreamEndCapture"),
		b(&d.cuGraphInstantiate, "cuGraphInstantiateWithFlags"),
		b(&d.cuGraphUpload, "cuGraphUpload"),
		b(&d.cuGraphExecDestroy, "cuGraphExecDestroy"),
		b(&d.cuGraphDestroy, "cuGraphDestroy"),
		b(&d.cuGetErrorName, "cuGetErrorName"),
		b(&d.cuGetErrorString, "cuGetErrorString"),
	}); err != nil {
		return nil, err
	}
	// A GPU's UUID only names it in results' provenance: a driver without the call
	// still runs everything.
	if lib.Bind(&d.cuDeviceGetUuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid") != nil {
		d.cuDeviceGetUuid = nil
	}
	for _, f := range []struct {
		sym  *uintptr
		name string
	}{
		{&d.fast.launchKernel, "cuLaunchKernel"},
		{&d.fast.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"},
		{&d.fast.eventRecord, "cuEventRecord"},
		{&d.fast.streamWaitEvent, "cuStreamWaitEvent"},
		{&d.fast.graphLaunch, "cuGraphLaunch"},
	} {
		if *f.sym, err = lib.Sym(f.name); err != nil {
			return nil, err
		}
	}
	if err := d.check("cuInit", d.cuInit(0)); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Driver) check(call string, code int32) error {
	if code == 0 {
		return nil
	}
	e := &Error{Call: call, Code: code, Name: "CUDA_ERROR_UNKNOWN", Text: "unknown error"}
	var p *byte
	if d.cuGetErrorName(code, &p) == 0 {
		e.Name = dl.GoString(p)
	}
	if d.cuGetErrorString(code, &p) == 0 {
		e.Text = dl.GoString(p)
	}
	return e
}

// Version returns the driver's CUDA version, e.g. 13000.
func (d *Driver) Version() (int, error) {
	var v int32
	return int(v), d.check("cuDriverGetVersion", d.cuDriverGetVersion(&v))
}

// DeviceCount returns the number of visible GPUs.
func (d *Driver) DeviceCount() (int, error) {
	var n int32
	return int(n), d.check("cuDeviceGetCount", d.cuDeviceGetCount(&n))
}

// DeviceInfo describes one GPU.
type DeviceInfo struct {
	Ordinal  int    `json:"ordinal"`
	Name     string `json:"name"`
	CC       int    `json:"compute_capability"` // major*10+minor
	SMs      int    `json:"sms"`
	MemBytes uint64 `json:"memory_bytes"`
	PCIBusID string `json:"pci_bus_id"`
	UUID     string `json:"uuid,omitempty"` // as nvidia-smi -L prints it: GPU-xxxxxxxx-...
}

// Device reads a GPU's facts.
func (d *Driver) Device(ordinal int) (DeviceInfo, error) {
	var dev int32
	if err := d.check("cuDeviceGet", d.cuDeviceGet(&dev, int32(ordinal))); err != nil {
		return DeviceInfo{}, err
	}
	name := make([]byte, 256)
	if err := d.check("cuDeviceGetName", d.cuDeviceGetName(&name[0], 256, dev)); err != nil {
		return DeviceInfo{}, err
	}
	info := DeviceInfo{Ordinal: ordinal, Name: dl.GoString(&name[0])}
	attr := func(a int32) int {
		var v int32
		d.cuDeviceGetAttribute(&v, a, dev)
		return int(v)
	}
	info.CC = attr(AttrCCMajor)*10 + attr(AttrCCMinor)
	info.SMs = attr(AttrSMCount)
	info.PCIBusID = fmt.Sprintf("%08x:%02x:%02x.0", attr(AttrPCIDomainID), attr(AttrPCIBusID), attr(AttrPCIDeviceID))
	d.cuDeviceTotalMem(&info.MemBytes, dev)
	if d.cuDeviceGetUuid != nil {
		var u [16]byte
		if d.cuDeviceGetUuid(&u[0], dev) == 0 {
			info.UUID = FormatUUID(u)
		}
	}
	return info, nil
}

// FormatUUID writes a CUuuid as nvidia-smi and NVML name a GPU:
// GPU-c9e997a7-4c93-a59d-9408-e30d6afeff7d.
func FormatUUID(u [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// CanAccessPeer reports whether GPU a can map GPU b's memory.
func (d *Driver) CanAccessPeer(a, b int) (bool, error) {
	var ok int32
	err := d.check("cuDeviceCanAccessPeer", d.cuDeviceCanAccessPeer(&ok, int32(a), int32(b)))
	return ok != 0, err
}

// EnvCtxFlags is an experiment's switch (issue 13: the launch cost of kernels that
// call NVSHMEM): flags for the primary context before it is made, e.g. 0x10
// (CU_CTX_LMEM_RESIZE_TO_MAX).
const EnvCtxFlags = "SYMMEM_TEST_CTX_FLAGS"

// Context is a device's primary context, current on the calling (locked) thread.
type Context struct {
	d   *Driver
	dev int32
	ctx uintptr
}

// Retain makes GPU ordinal's primary context current on this thread, which it locks.
func (d *Driver) Retain(ordinal int) (*Context, error) {
	runtime.LockOSThread()
	var dev int32
	if err := d.check("cuDeviceGet", d.cuDeviceGet(&dev, int32(ordinal))); err != nil {
		return nil, err
	}
	c := &Context{d: d, dev: dev}
	if f := os.Getenv(EnvCtxFlags); f != "" {
		v, err := strconv.ParseUint(f, 0, 32)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: want a number such as 0x10", EnvCtxFlags, f)
		}
		if err := d.check("cuDevicePrimaryCtxSetFlags", d.cuDevicePrimaryCtxSetFlags(dev, uint32(v))); err != nil {
			return nil, err
		}
	}
	if err := d.check("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(&c.ctx, dev)); err != nil {
		return nil, err
	}
	if err := d.check("cuCtxSetCurrent", d.cuCtxSetCurrent(c.ctx)); err != nil {
		return nil, err
	}
	return c, nil
}

// Release drops the primary context.
func (c *Context) Release() error {
	return c.d.check("cuDevicePrimaryCtxRelease", c.d.cuDevicePrimaryCtxRelease(c.dev))
}

// Synchronize waits for all work in the context.
func (c *Context) Synchronize() error { return c.d.check("cuCtxSynchronize", c.d.cuCtxSynchronize()) }

// Alloc allocates device memory.
func (c *Context) Alloc(n uint64) (Ptr, error) {
	var p Ptr
	return p, c.d.check("cuMemAlloc", c.d.cuMemAlloc(&p, n))
}

// Free frees device memory.
func (c *Context) Free(p Ptr) error { return c.d.check("cuMemFree", c.d.cuMemFree(p)) }

// HostWords is pinned host memory the GPU reads and writes through its own address for
// it (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP): a kernel's stores land in host
// memory, where the host reads them without a copy, even after the context has failed.
type HostWords struct {
	c     *Context
	p     unsafe.Pointer
	Dev   Ptr      // the GPU's address for the words
	Words []uint64 // the host's view of the same memory
}

// MapHostWords allocates n words of mapped, pinned host memory, zeroed.
func (c *Context) MapHostWords(n int) (*HostWords, error) {
	const deviceMap = 0x02 // CU_MEMHOSTALLOC_DEVICEMAP
	h := &HostWords{c: c}
	if err := c.d.check("cuMemHostAlloc", c.d.cuMemHostAlloc(&h.p, uint64(n)*8, deviceMap)); err != nil {
		return nil, err
	}
	if err := c.d.check("cuMemHostGetDevicePointer", c.d.cuMemHostGetDevicePointer(&h.Dev, h.p, 0)); err != nil {
		c.d.cuMemFreeHost(h.p)
		return nil, err
	}
	h.Words = unsafe.Slice((*uint64)(h.p), n)
	clear(h.Words)
	return h, nil
}

// Free releases the memory; the words must not be used after it.
func (h *HostWords) Free() error {
	h.Words = nil
	return h.c.d.check("cuMemFreeHost", h.c.d.cuMemFreeHost(h.p))
}

// CopyHtoD copies host bytes to the device.
func (c *Context) CopyHtoD(dst Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return c.d.check("cuMemcpyHtoD", c.d.cuMemcpyHtoD(dst, unsafe.Pointer(&src[0]), uint64(len(src))))
}

// CopyDtoH copies device bytes to the host.
func (c *Context) CopyDtoH(dst []byte, src Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return c.d.check("cuMemcpyDtoH", c.d.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), src, uint64(len(dst))))
}

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
}

// maxParams bounds a kernel's parameters (Triton's kernels here take up to ~20).
const maxParams = 64

// paramSlots is cuLaunchKernel's kernelParams: ptrs[i] points at vals[i]. One heap
// object, pinned during a launch, so that the driver reads it in place (Go's heap does
// not move objects; the pin makes passing it to C legitimate).
type paramSlots struct {
	vals [maxParams]uint64
	ptrs [maxParams]unsafe.Pointer
	call [11]uintptr // cuLaunchKernel's own arguments
}

// Dim is a launch shape.
type Dim struct{ Grid, Block, Shared uint32 }

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
	var code int32
	if cooperative {
		code = f.c.d.cuLaunchCooperativeKernel(f.H, dim.Grid, 1, 1, dim.Block, 1, 1, dim.Shared, s.H, unsafe.Pointer(&p.ptrs[0]))
	} else {
		p.call = [11]uintptr{f.H, uintptr(dim.Grid), 1, 1, uintptr(dim.Block), 1, 1, uintptr(dim.Shared), s.H,
			uintptr(unsafe.Pointer(&p.ptrs[0])), 0}
		code = dl.Call(f.c.d.fast.launchKernel, p.call[:]...)
	}
	pin.Unpin()
	if code != 0 {
		err := f.c.d.check("cuLaunchKernel", code).(*Error)
		err.Call = fmt.Sprintf("launching kernel %s (grid %d, block %d)", f.Name, dim.Grid, dim.Block)
		return err
	}
	return nil
}
