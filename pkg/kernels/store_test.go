package kernels

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	embedded "github.com/symmem/symmem/kernels"
	"github.com/symmem/symmem/pkg/nvshmem"
)

// readCounter is a catalogue's files that note each kernel body read from: where a
// listing would read one, whatever it then did with it.
type readCounter struct {
	fs.FS
	mu     sync.Mutex
	bodies []string
}

func (c *readCounter) Open(name string) (fs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil || name == "." || strings.HasSuffix(name, ".json") {
		return f, err
	}
	return &countedFile{File: f, name: name, c: c}, nil
}

type countedFile struct {
	fs.File
	name string
	c    *readCounter
}

func (f *countedFile) Read(b []byte) (int, error) {
	n, err := f.File.Read(b)
	if n > 0 {
		f.c.mu.Lock()
		if !slices.Contains(f.c.bodies, f.name) {
			f.c.bodies = append(f.c.bodies, f.name)
		}
		f.c.mu.Unlock()
	}
	return n, err
}

// Listing and planning (what kernels list, the catalogue's summary and a run's checks
// before launch do) read no kernel body: the embedded ones are decompressed one at a
// time, each when its kernel is loaded.
func TestListingReadsNoBody(t *testing.T) {
	sub, err := fs.Sub(embedded.FS, "build")
	if err != nil {
		t.Fatal(err)
	}
	fsys := &readCounter{FS: sub}
	c, err := Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Hash() + c.Summary()
	h := Host{CCs: []int{90, 80}, Lib: [3]int{3, 4, 5}}
	for _, impl := range c.Impls() {
		ks := c.Kernels(impl)
		_ = c.CheckLoad(impl, ks, h, 2)
		for _, k := range ks {
			for _, cc := range []int{80, 90, 100, 120} {
				if a, err := c.Select(impl, k, 0, cc); err == nil {
					_ = a.CheckHost(nvshmem.Version{3, 4, 5})
				}
				_, _ = c.SelectPTX(impl, k, 0, cc)
			}
			_ = c.Warps(impl, k)
		}
	}
	for _, a := range c.Artifacts {
		a.LoadsOn(h)
		_ = a.Path() + a.Name() + a.BuiltAgainst()
		_ = a.CheckSignature()
	}
	if len(fsys.bodies) > 0 {
		t.Fatalf("listing read %d kernel bodies: %v", len(fsys.bodies), fsys.bodies[:min(3, len(fsys.bodies))])
	}
	// Loading one reads it (the counter sees what it must).
	a, err := c.Select("triton", "put_block", 0, 90)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Data(); err != nil {
		t.Fatal(err)
	}
	if want := []string{a.File + PackedSuffix}; !slices.Equal(fsys.bodies, want) {
		t.Errorf("loading %s read %v, want %v", a.Name(), fsys.bodies, want)
	}
}

// The embedded kernels are stored compressed: a body left plain in kernels/build (a
// build copied in without its last step) is not what the binary embeds.
func TestEmbeddedKernelsArePacked(t *testing.T) {
	dir := filepath.Join("..", "..", "kernels", "build")
	for _, pat := range []string{"*.cubin", "*.ptx"} {
		plain, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			t.Fatal(err)
		}
		if len(plain) > 0 {
			t.Errorf("%s holds kernels not compressed (%s, %d in all): run bin/symmem kernels pack kernels/build", dir, filepath.Base(plain[0]), len(plain))
		}
	}
	zst, err := fs.Glob(embedded.FS, "build/*"+PackedSuffix)
	if err != nil || len(zst) == 0 {
		t.Fatalf("no compressed kernels embedded: %v", err)
	}
}

// packedCopy is a copy of testdata/user with its bodies packed.
func packedCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(userDir)); err != nil {
		t.Fatal(err)
	}
	done, err := Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 3 {
		t.Fatalf("packed %v, want the 3 kernels", done)
	}
	return dir
}

// A packed directory reads as the plain one did, byte for byte; packing it again
// changes nothing.
func TestPackedDirReadsAsPlain(t *testing.T) {
	dir := packedCopy(t)
	for _, p := range []string{"myput.put_block.w8.sm90.cubin", "myput.put_block.w8.sm80.ptx", "myput.get_block.w8.sm90.cubin"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s is still there beside its compressed copy", p)
		}
	}
	plain, err := LoadDir(userDir)
	if err != nil {
		t.Fatal(err)
	}
	packed, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range packed.Artifacts {
		want, err := plain.Artifacts[i].Data()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := a.Data(); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes (%v), want the %d the plain file holds", a.Name(), len(got), err, len(want))
		}
	}
	if done, err := Pack(dir); err != nil || len(done) != 0 {
		t.Errorf("packing again: %v %v, want nothing done", done, err)
	}
}

// Pack replaces nothing whose bytes are not those its sidecar hashed, and names a
// kernel it cannot find.
func TestPackRefusesAChangedKernel(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(userDir)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "myput.put_block.w8.sm80.ptx")
	if err := os.WriteFile(p, []byte("// not the PTX the sidecar describes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Pack(dir)
	if err == nil || !strings.Contains(err.Error(), "kernel myput/put_block w8 compute_80: myput.put_block.w8.sm80.ptx has sha256") {
		t.Errorf("got %v, want the changed kernel named", err)
	}
	if _, err := os.Stat(p + PackedSuffix); err == nil {
		t.Error("the changed kernel was packed")
	}
	os.Remove(p)
	if _, err := Pack(dir); err == nil || !strings.Contains(err.Error(), "kernel myput/put_block w8 compute_80: ") {
		t.Errorf("a missing kernel: %v, want it named", err)
	}
}

// A damaged or cut compressed kernel is refused by name, when a user's directory is
// read (its hash is checked there) and when a kernel is loaded, and never panics.
func TestDamagedPackedKernelIsNamed(t *testing.T) {
	const file = "myput.put_block.w8.sm90.cubin" + PackedSuffix
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"cut in half", func(b []byte) []byte { return b[:len(b)/2] }},
		{"cut by a byte", func(b []byte) []byte { return b[:len(b)-1] }},
		{"empty", func([]byte) []byte { return nil }},
		{"a byte flipped in the header", func(b []byte) []byte { b[5] ^= 0x40; return b }},
		{"a byte flipped in the middle", func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }},
		{"a byte flipped in the checksum", func(b []byte) []byte { b[len(b)-1] ^= 0x40; return b }},
		{"not compressed", func([]byte) []byte { return []byte("ELF, say, but no zstd frame") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := packedCopy(t)
			p := filepath.Join(dir, file)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, tc.damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
			want := "kernel myput/put_block w8 sm_90a: " + p + " cannot be decompressed ("
			remedy := "): the file is damaged; rebuild it with symmem kernels build FILE.py --out DIR"
			_, err = LoadDir(dir)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.HasSuffix(err.Error(), remedy) {
				t.Errorf("reading the directory: %v, want %q ... %q", err, want, remedy)
			}
			// Load checks no hash: loading the kernel finds the damage.
			c, err := Load(os.DirFS(dir))
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range c.Artifacts {
				a.dir = dir
				got, err := a.Data()
				if a.File+PackedSuffix != file {
					if err != nil {
						t.Errorf("%s: %v", a.Name(), err)
					}
					continue
				}
				if err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Errorf("loading it: %d bytes, %v; want %q", len(got), err, want)
				}
			}
		})
	}
}

// The embedded catalogue's message names the file in kernels/build and its remedy.
func TestDamagedEmbeddedKernelIsNamed(t *testing.T) {
	sub, err := fs.Sub(embedded.FS, "build")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(sub)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Select("triton", "put_block", 4, 90)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(sub, a.File+PackedSuffix)
	if err != nil {
		t.Fatal(err)
	}
	a.fsys = fstest.MapFS{a.File + PackedSuffix: {Data: b[:len(b)-9]}}
	_, err = a.Data()
	want := "kernel triton/put_block w4 sm_90a: kernels/build/" + a.File + PackedSuffix + " cannot be decompressed ("
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "): the file is damaged; rebuild the kernels with scripts/build-kernels.sh") {
		t.Errorf("got %v, want %q...", err, want)
	}
}

// BenchmarkUnpack is what loading a kernel costs for its decompression: the largest
// embedded kernel and a typical one (the median size), read and decompressed.
//
//	go test -run '^$' -bench Unpack ./pkg/kernels
func BenchmarkUnpack(b *testing.B) {
	c := Default()
	type body struct {
		a          *Artifact
		size, disk int
	}
	var bodies []body
	seen := map[string]bool{}
	for _, a := range c.Artifacts {
		if seen[a.File] {
			continue
		}
		seen[a.File] = true
		d, err := a.body()
		if err != nil {
			b.Fatal(err)
		}
		z, err := fs.ReadFile(a.fsys, a.File+PackedSuffix)
		if err != nil {
			b.Fatal(err)
		}
		bodies = append(bodies, body{a, len(d), len(z)})
	}
	slices.SortFunc(bodies, func(x, y body) int { return x.size - y.size })
	for _, k := range []struct {
		name string
		body
	}{{"largest", bodies[len(bodies)-1]}, {"typical", bodies[len(bodies)/2]}} {
		b.Run(fmt.Sprintf("%s=%s", k.name, k.a.File), func(b *testing.B) {
			b.SetBytes(int64(k.size))
			for b.Loop() {
				if _, err := k.a.body(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(b.N), "ms/kernel")
			b.ReportMetric(float64(k.size)/float64(k.disk), "ratio")
		})
	}
}
