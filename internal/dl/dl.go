// Package dl opens C libraries at run time (github.com/ebitengine/purego), so symmem
// builds without the CUDA toolkit or NVSHMEM headers and still runs where only the
// driver is installed. Every symbol is looked up with a clear error, never a panic.
// The design card's gorgonia.org/cu is not used: it binds the driver with cgo against
// cuda.h and does not build against CUDA 13's (docs/development.md).
package dl

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Lib is an opened shared library.
type Lib struct {
	Path   string // as opened, or for a bare soname the file the loader mapped
	handle uintptr
}

// Open dlopens path (a file or a soname the dynamic loader finds).
func Open(path string) (*Lib, error) {
	// dlerror's message is kept per OS thread, and purego calls dlopen and dlerror as two
	// calls between which the goroutine may move to another thread: it then reads that
	// thread's message (none, or another dlopen's). Both calls stay on one thread.
	runtime.LockOSThread()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	runtime.UnlockOSThread()
	if err != nil {
		reason := err.Error()
		if reason == "" {
			reason = "the dynamic loader gave no reason"
		}
		return nil, fmt.Errorf("dlopen %s: %s", path, reason)
	}
	l := &Lib{Path: path, handle: h}
	if !strings.Contains(path, "/") {
		if p := MappedPath(path); p != "" {
			l.Path = p
		}
	}
	return l, nil
}

// MappedPath is the file this process mapped for the library soname, "" when none:
// after dlopen of a bare soname, which file the dynamic loader chose. A soname is
// usually a link to a file whose name goes on with the version (libnccl.so.2 to
// libnccl.so.2.28.9), and the loader maps that file.
func MappedPath(soname string) string {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(maps), "\n") {
		i := strings.Index(line, "/")
		if i < 0 {
			continue
		}
		p := strings.TrimSuffix(line[i:], " (deleted)")
		if base := filepath.Base(p); base == soname || strings.HasPrefix(base, soname+".") {
			return p
		}
	}
	return ""
}

// Bind points fptr (a pointer to a func variable) at the first of names the library
// exports. Drivers rename symbols across versions (cuMemAlloc_v2), hence several names.
func (l *Lib) Bind(fptr any, names ...string) error {
	for _, n := range names {
		sym, err := purego.Dlsym(l.handle, n)
		if err == nil && sym != 0 {
			purego.RegisterFunc(fptr, sym)
			return nil
		}
	}
	return fmt.Errorf("%s does not export %s: the library is too old or not the one expected", l.Path, strings.Join(names, " or "))
}

// Sym is the address of the first of names the library exports, for Call.
func (l *Lib) Sym(names ...string) (uintptr, error) {
	for _, n := range names {
		if sym, err := purego.Dlsym(l.handle, n); err == nil && sym != 0 {
			return sym, nil
		}
	}
	return 0, fmt.Errorf("%s does not export %s: the library is too old or not the one expected", l.Path, strings.Join(names, " or "))
}

// Call calls the C function at sym (from Sym) with integer and pointer arguments and
// returns its 32-bit integer result (a CUDA driver's error code). It is for calls made
// per operation (a kernel launch, an event record): a function bound with Bind goes
// through reflection, ~0.7 us a call with 11 arguments against ~0.13 us here (measured
// with purego on this project's build machine). Pointers passed must stay reachable
// and unmoved until it returns (heap memory the caller keeps, pinned).
func Call(sym uintptr, args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(sym, args...)
	return int32(r)
}

// Binding names one function to bind.
type Binding struct {
	Fn    any
	Names []string
}

// BindAll binds every entry and reports the first symbol missing.
func (l *Lib) BindAll(bs []Binding) error {
	for _, b := range bs {
		if err := l.Bind(b.Fn, b.Names...); err != nil {
			return err
		}
	}
	return nil
}

// GoString copies a NUL-terminated C string.
func GoString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
