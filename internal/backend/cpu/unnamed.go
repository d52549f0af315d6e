package cpu

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/symmem/symmem/internal/units"
)

// EnvHeapFD names the descriptor under which a rank that symmem's launcher started
// inherits the job's heap (always 3: the first of exec.Cmd.ExtraFiles).
const EnvHeapFD = "SYMMEM_HEAP_FD"

// CreateUnnamed makes the heap of a job whose ranks the caller starts itself, as a
// file with no name in ShmDir: the ranks inherit it (EnvHeapFD) and map it, and it is
// freed when the last of them, and the caller, close it. A named heap outlived a
// launcher killed (SIGKILL cannot be caught) between making it and its ranks mapping
// it: 201 MB of an 8-rank job stayed in /dev/shm until the next run.
func CreateUnnamed(nranks int, heap int64) (*os.File, error) {
	dir := ShmDir
	RemoveStale(dir) // named heaps that an older symmem's launcher left
	size := headerSize + int64(nranks)*regionSize(heap)
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
		return createUnlinked(dir, nranks, heap) // a file system (or kernel) without O_TMPFILE
	}
	if err != nil {
		return nil, fmt.Errorf("cpu backend: creating the shared heap: %w; the ranks share their memory through a file in %s: it must be a directory this user can write, with room (df -h %s)", err, dir, dir)
	}
	f := os.NewFile(uintptr(fd), dir+"/(unnamed heap)")
	if err := fill(f, dir, nranks, heap, size); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// createUnlinked is CreateUnnamed by a name removed at once.
func createUnlinked(dir string, nranks int, heap int64) (*os.File, error) {
	path := HeapPath("unnamed-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(int64(nranks), 10))
	if err := Create(path, nranks, heap); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	os.Remove(path)
	return f, err
}

// fill sizes and reserves a new heap file, and records the pid namespace.
func fill(f *os.File, dir string, nranks int, heap, size int64) error {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) == nil {
		if free := int64(st.Bavail) * st.Bsize; size > free {
			return fmt.Errorf("cpu backend: the shared heap of %d ranks x %s needs %s in %s, which has %s free: run fewer ranks or smaller sizes, or make room there (df -h %s)",
				nranks, units.FormatSize(heap), units.FormatSize(size), dir, units.FormatSize(free), dir)
		}
	}
	if err := reserve(f, size); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return fmt.Errorf("cpu backend: the shared heap of %d ranks x %s needs %s in %s, which has no room for it (filled since, or other files in it): run fewer ranks or smaller sizes, or make room there (df -h %s)",
				nranks, units.FormatSize(heap), units.FormatSize(size), dir, dir)
		}
		return fmt.Errorf("cpu backend: sizing the shared heap in %s: %w", dir, err)
	}
	if ns := pidNamespace(); ns != "" {
		f.WriteAt(append([]byte(ns), 0), offPidNS)
	}
	return nil
}

// HeapFile is where a rank opens its job's heap: the descriptor it inherited from
// symmem's launcher, else the job's named heap (an external launcher's job).
func HeapFile(job string) string {
	if fd := os.Getenv(EnvHeapFD); fd != "" {
		return "/proc/self/fd/" + fd
	}
	return HeapPath(job)
}
