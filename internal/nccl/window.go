package nccl

import (
	"errors"
	"fmt"

	"github.com/symmem/symmem/internal/dl"
)

// SymmetricSince is the first NCCL release with window registration
// (ncclCommWindowRegister) and the symmetric-memory collective kernels it enables.
var SymmetricSince = Version{2, 27, 0}

// winCollSymmetric is NCCL_WIN_COLL_SYMMETRIC (nccl.h): the window is registered by
// every rank at the same offset of NCCL's symmetric space, so collectives on it may use
// the symmetric kernels.
const winCollSymmetric = 0x01

// UnsupportedError says that the library cannot serve a feature: too old, or built
// without the entry points it needs.
type UnsupportedError struct {
	Feature string  // "symmetric windows"
	Need    Version // the first release that has it
	Found   Version
	Missing string // the symbol the library lacks, if that is why
	Path    string // the library's file
}

func (e *UnsupportedError) Error() string {
	msg := fmt.Sprintf("NCCL %s has no %s: it needs NCCL %d.%d or newer", e.Found, e.Feature, e.Need.Major, e.Need.Minor)
	if e.Missing != "" {
		msg += fmt.Sprintf(" (the library does not export %s)", e.Missing)
	}
	if e.Path != "" {
		msg += " (found at " + e.Path + ")"
	}
	return msg
}

// windowFns are the optional entry points of symmetric windows, bound when present.
type windowFns struct {
	memAlloc      func(ptr *uintptr, size uint64) Result
	memFree       func(ptr uintptr) Result
	winRegister   func(comm, buf uintptr, size uint64, win *uintptr, flags int32) Result
	winDeregister func(comm, win uintptr) Result
	missing       string // the first symbol not found; "" when all are there
}

// bindWindows binds the window entry points the library has; their absence is no error
// until a caller asks for windows (Symmetric).
func (w *windowFns) bind(lib *dl.Lib) {
	for _, b := range []dl.Binding{
		{Fn: &w.memAlloc, Names: []string{"ncclMemAlloc"}},
		{Fn: &w.memFree, Names: []string{"ncclMemFree"}},
		{Fn: &w.winRegister, Names: []string{"ncclCommWindowRegister"}},
		{Fn: &w.winDeregister, Names: []string{"ncclCommWindowDeregister"}},
	} {
		if err := lib.Bind(b.Fn, b.Names...); err != nil {
			w.missing = b.Names[0]
			return
		}
	}
}

// Symmetric says whether the library can register symmetric windows: nil, or an
// *UnsupportedError naming the release needed and what was found.
func (l *Lib) Symmetric() error {
	if l.version.less(SymmetricSince) || l.win.missing != "" {
		return &UnsupportedError{Feature: "symmetric windows", Need: SymmetricSince, Found: l.version, Missing: l.win.missing, Path: l.Path}
	}
	return nil
}

// AtLeast says whether v is release o or a later one.
func (v Version) AtLeast(o Version) bool { return !v.less(o) }

func (v Version) less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	return v.Patch < o.Patch
}

// MemAlloc allocates size bytes of device memory with ncclMemAlloc (cuMem* memory that
// a window can register). The rank's CUDA context must be current.
func (l *Lib) MemAlloc(size int) (uintptr, error) {
	if err := l.Symmetric(); err != nil {
		return 0, err
	}
	if size <= 0 {
		return 0, fmt.Errorf("ncclMemAlloc: size %d: it must be positive", size)
	}
	var p uintptr
	if err := l.check("ncclMemAlloc", l.win.memAlloc(&p, uint64(size)), 0); err != nil {
		return 0, fmt.Errorf("allocating %d bytes: %w", size, err)
	}
	return p, nil
}

// MemFree frees memory from MemAlloc.
func (l *Lib) MemFree(p uintptr) error {
	if err := l.Symmetric(); err != nil {
		return err
	}
	return l.check("ncclMemFree", l.win.memFree(p), 0)
}

// Window is a buffer registered with a communicator. Registration and deregistration
// are collective: every rank calls them, with the same size, in the same order.
type Window struct {
	comm *Comm
	h    uintptr
	Buf  uintptr
	Size int
}

var errDeregistered = errors.New("the NCCL window was deregistered")

// RegisterWindow registers size bytes at buf (memory from MemAlloc) as a symmetric
// window of the communicator, so that collectives on it may use NCCL's
// symmetric-memory kernels. Every rank must call it with the same size.
func (c *Comm) RegisterWindow(buf uintptr, size int) (*Window, error) {
	if err := c.lib.Symmetric(); err != nil {
		return nil, err
	}
	if c.h == 0 {
		return nil, fmt.Errorf("ncclCommWindowRegister: %w", errDestroyed)
	}
	if buf == 0 || size <= 0 {
		return nil, fmt.Errorf("ncclCommWindowRegister: buffer %#x of %d bytes: want memory from ncclMemAlloc and a positive size", buf, size)
	}
	var h uintptr
	if err := c.lib.check("ncclCommWindowRegister", c.lib.win.winRegister(c.h, buf, uint64(size), &h, winCollSymmetric), c.h); err != nil {
		return nil, fmt.Errorf("rank %d registering %d bytes at %#x: %w", c.rank, size, buf, err)
	}
	return &Window{comm: c, h: h, Buf: buf, Size: size}, nil
}

// Deregister releases the window (collective, as RegisterWindow). A second call is an
// error: the handle no longer names a window.
func (w *Window) Deregister() error {
	if w.h == 0 {
		return fmt.Errorf("ncclCommWindowDeregister: %w", errDeregistered)
	}
	if w.comm.h == 0 {
		return fmt.Errorf("ncclCommWindowDeregister: %w", errDestroyed)
	}
	err := w.comm.lib.check("ncclCommWindowDeregister", w.comm.lib.win.winDeregister(w.comm.h, w.h), w.comm.h)
	w.h = 0
	return err
}
