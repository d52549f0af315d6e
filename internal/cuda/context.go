package cuda

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"unsafe"
)

// EnvCtxFlags is a switch for measuring the launch cost of kernels that
// call NVSHMEM: flags for the primary context before it is made, e.g. 0x10
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

// Zero sets n bytes of the device from dst to zero and returns once they are: a memset
// of device memory is asynchronous to the host, and whoever is told next (a peer past a
// barrier that runs on another stream) must find them cleared.
func (c *Context) Zero(dst Ptr, n uint64) error {
	if n == 0 {
		return nil
	}
	if err := c.d.check("cuMemsetD8", c.d.cuMemsetD8(dst, 0, n)); err != nil {
		return err
	}
	return c.d.check("cuStreamSynchronize", c.d.cuStreamSynchronize(0)) // the memset's stream: the legacy default one
}

// CopyDtoH copies device bytes to the host.
func (c *Context) CopyDtoH(dst []byte, src Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return c.d.check("cuMemcpyDtoH", c.d.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), src, uint64(len(dst))))
}
