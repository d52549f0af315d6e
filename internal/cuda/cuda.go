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
	"sync"
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
	cuMemsetD8                 func(dst Ptr, v uint8, n uint64) int32
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
	cuFuncSetAttribute         func(f uintptr, attr int32, v int32) int32
	cuLinkCreate               func(n uint32, opts *int32, vals *uintptr, state *uintptr) int32
	cuLinkAddData              func(state uintptr, kind int32, data unsafe.Pointer, size uint64, name string, n uint32, opts *int32, vals *uintptr) int32
	cuLinkAddFile              func(state uintptr, kind int32, path string, n uint32, opts *int32, vals *uintptr) int32
	cuLinkComplete             func(state uintptr, image *unsafe.Pointer, size *uint64) int32
	cuLinkDestroy              func(state uintptr) int32
	cuStreamBeginCapture       func(s uintptr, mode int32) int32
	cuStreamEndCapture         func(s uintptr, g *uintptr) int32
	cuGraphInstantiate         func(exec *uintptr, g uintptr, flags uint64) int32
	cuGraphUpload              func(exec, s uintptr) int32
	cuGraphExecDestroy         func(exec uintptr) int32
	cuGraphDestroy             func(g uintptr) int32
	cuGetErrorName             func(code int32, s **byte) int32
	cuGetErrorString           func(code int32, s **byte) int32

	// The calls made per operation, called through dl.Call rather than bound: a kernel
	// launch (cooperative or not), a copy, the events and graph launches around them.
	// Called with every argument a machine word, as the C ABI passes them: the launches
	// take ten or eleven, some on the stack.
	fast struct{ launchKernel, launchCooperative, memcpyDtoDAsync, eventRecord, streamWaitEvent, graphLaunch uintptr }
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
		b(&d.cuMemsetD8, "cuMemsetD8_v2"),
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
		b(&d.cuFuncSetAttribute, "cuFuncSetAttribute"),
		b(&d.cuLinkCreate, "cuLinkCreate_v2"),
		b(&d.cuLinkAddData, "cuLinkAddData_v2"),
		b(&d.cuLinkAddFile, "cuLinkAddFile_v2"),
		b(&d.cuLinkComplete, "cuLinkComplete"),
		b(&d.cuLinkDestroy, "cuLinkDestroy"),
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
		{&d.fast.launchCooperative, "cuLaunchCooperativeKernel"},
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
