package nvshmem_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/symmem/symmem/pkg/nvshmem"
)

// An explicit directory is searched for the library's soname, and nowhere else.
func ExampleFind() {
	dir, _ := os.MkdirTemp("", "nvshmem-example")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, nvshmem.LibName), nil, 0o644) // stands in for the real library

	s := nvshmem.Find(dir)
	rel, _ := filepath.Rel(dir, s.Chosen)
	fmt.Println(rel, len(s.Tried), s.Err())
	// Output:
	// libnvshmem_host.so.3 1 <nil>
}

// A path that holds no library is an error that says so; it is not replaced by some
// other library found elsewhere.
func ExampleSearch_Err() {
	err := nvshmem.Find("/nonexistent/libnvshmem_host.so.3").Err()
	fmt.Println(err)
	fmt.Println(errors.Is(err, nvshmem.ErrNotFound), errors.Is(err, fs.ErrNotExist))
	// Output:
	// NVSHMEM host library libnvshmem_host.so.3 not found: /nonexistent/libnvshmem_host.so.3: file does not exist
	// true true
}

// Opening a library that is not there fails with the dynamic loader's reason, not a
// crash.
func ExampleOpen() {
	_, err := nvshmem.Open("/nonexistent/libnvshmem_host.so.3")
	fmt.Println(strings.Contains(err.Error(), "cannot open shared object file"))
	// Output:
	// true
}

func ExampleParseVersion() {
	v, err := nvshmem.ParseVersion("3.4.5")
	fmt.Println(v, v[1], err)
	_, err = nvshmem.ParseVersion("3.x")
	fmt.Println(err)
	// Output:
	// 3.4.5 4 <nil>
	// NVSHMEM version "3.x": "x" is not a number; want MAJOR.MINOR[.PATCH], such as 3.4.5
}

// A host library serves kernels built against a device library of its major version
// and no newer minor.
func ExampleVersion_Serves() {
	host := nvshmem.Version{3, 4, 5}
	for _, device := range []nvshmem.Version{{3, 3, 9}, {3, 4, 0}, {3, 5, 0}, {2, 11, 0}} {
		fmt.Printf("host %s serves device %s: %t\n", host, device, host.Serves(device))
	}
	// Output:
	// host 3.4.5 serves device 3.3.9: true
	// host 3.4.5 serves device 3.4.0: true
	// host 3.4.5 serves device 3.5.0: false
	// host 3.4.5 serves device 2.11.0: false
}

// A job whose buffers take 1 GiB per rank sets NVSHMEM_SYMMETRIC_SIZE to this before
// Init.
func ExampleSymmetricSize() {
	fmt.Println(nvshmem.SymmetricSize(1<<30) >> 20)
	// Output:
	// 1184
}
