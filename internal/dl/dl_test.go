package dl

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// Call passes pointer and integer arguments through and returns a negative int
// whole (the driver's error codes are 32-bit): libc's atoi and abs stand in for the
// driver here.
func TestCall(t *testing.T) {
	lib, err := Open("libc.so.6")
	if err != nil {
		t.Fatalf("glibc, which stands in for the driver: %v", err)
	}
	atoi, err := lib.Sym("atoi")
	if err != nil {
		t.Fatal(err)
	}
	s := []byte("-700\x00")
	got := Call(atoi, uintptr(unsafe.Pointer(&s[0])))
	runtime.KeepAlive(s)
	if got != -700 {
		t.Errorf("atoi(\"-700\") = %d through Call", got)
	}
	abs, err := lib.Sym("labs_missing_symbol", "abs")
	if err != nil {
		t.Fatal(err)
	}
	if got := Call(abs, uintptr(0xffffffff)); got != 1 { // abs(-1): the low 32 bits
		t.Errorf("abs(-1) = %d through Call", got)
	}
	if _, err := lib.Sym("symmem_no_such_symbol"); err == nil || !strings.Contains(err.Error(), "does not export symmem_no_such_symbol") {
		t.Errorf("a missing symbol: %v", err)
	}
}

// A library that cannot be opened must always come with the loader's reason, and its
// own: dlerror is per thread, and reading it after the goroutine moved thread gave an
// empty reason (2 of 20 `--backend auto` runs) or another library's.
func TestOpenMissingAlwaysSaysWhy(t *testing.T) {
	const workers, each = 16, 200
	var wg sync.WaitGroup
	errs := make(chan string, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				name := fmt.Sprintf("libsymmem-missing-%d-%d.so.1", w, i)
				_, err := Open(name)
				if err == nil {
					errs <- name + " opened"
					continue
				}
				// glibc: "dlopen NAME: NAME: cannot open shared object file: ..."
				msg := err.Error()
				if _, reason, _ := strings.Cut(msg, ": "); !strings.Contains(reason, name) {
					errs <- msg
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	var bad []string
	for e := range errs {
		bad = append(bad, e)
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d failed opens lacked their own reason, e.g. %q", len(bad), workers*each, bad[0])
	}
}

// The interpreter's own site-packages are searched first, and only places that exist
// are listed (no python3.X stand-ins).
func TestWheelLibsSearchesTheInterpretersSites(t *testing.T) {
	dir := t.TempDir()
	defer func(s []string) { ExtraSites = s }(ExtraSites)
	ExtraSites = []string{dir}
	got := WheelLibs("nvshmem", "libnvshmem_host.so.3")
	if len(got) == 0 || got[0] != filepath.Join(dir, "nvidia", "nvshmem", "lib", "libnvshmem_host.so.3") {
		t.Fatalf("search %v does not start in %s", got, dir)
	}
	for _, p := range got {
		if strings.Contains(p, "python3.X") || strings.Contains(p, "*") {
			t.Errorf("placeholder in the search: %s", p)
		}
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 here")
	}
	for _, d := range SitePackagesOf(t.Context(), py) {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Errorf("%s reported %s, which is no directory", py, d)
		}
	}
}

// Opened by a bare soname, a library's Path is the file the loader mapped, which for a
// soname that links to a versioned file (libz.so.1 to libz.so.1.2.13) has another
// name; that is where its neighbours (NVSHMEM's device archive) are.
func TestOpenSonameMapsItsFile(t *testing.T) {
	lib, err := Open("libz.so.1")
	if err != nil {
		t.Skipf("no libz.so.1 here to open by its soname: %v", err)
	}
	st, err := os.Stat(lib.Path)
	if !filepath.IsAbs(lib.Path) || err != nil || !st.Mode().IsRegular() || !strings.HasPrefix(filepath.Base(lib.Path), "libz.so.1") {
		t.Errorf("Open(libz.so.1).Path = %q (%v), want the file the loader mapped", lib.Path, err)
	}
	if MappedPath("libz.so.1") != lib.Path || MappedPath("libsymmem_none.so.1") != "" {
		t.Errorf("MappedPath: %q for libz.so.1, %q for a library never opened", MappedPath("libz.so.1"), MappedPath("libsymmem_none.so.1"))
	}
}
