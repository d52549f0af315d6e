package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// PackedSuffix ends the name of a kernel stored compressed (zstd): the body of the
// file a sidecar names, X.cubin, is X.cubin where that lies beside the sidecar, else
// X.cubin.zst decompressed. symmem's own kernels are stored so (kernels/build, and the
// binary embeds them so: a seventh of their size); a user's are written plain and read
// either way.
const PackedSuffix = ".zst"

// decoder decompresses kernel bodies, one at a time, each when its kernel is first
// loaded; it is made on first use, not when the program starts. A frame may not
// claim more than maxKernel bytes, the most a user's kernel may hold.
var decoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxKernel))
})

// stored is the name the artifact's body is stored under in its catalogue: its file,
// or its file compressed.
func (a *Artifact) stored() (string, error) {
	_, err := fs.Stat(a.fsys, a.File)
	if err == nil {
		return a.File, nil
	}
	if _, zerr := fs.Stat(a.fsys, a.File+PackedSuffix); zerr == nil {
		return a.File + PackedSuffix, nil
	}
	return "", err
}

// body is the artifact's bytes, as built: read, and decompressed where they are
// stored compressed.
func (a *Artifact) body() ([]byte, error) {
	name, err := a.stored()
	var b []byte
	if err == nil {
		b, err = fs.ReadFile(a.fsys, name)
	}
	if err != nil {
		return nil, fmt.Errorf("kernel %s: %w: %s", a.Name(), err, a.remedy())
	}
	if name == a.File {
		return b, nil
	}
	out, err := unpack(b)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: %s cannot be decompressed (%v): the file is damaged; %s", a.Name(), a.storedPath(name), err, a.remedy())
	}
	return out, nil
}

// unpack decompresses one body. An empty file is as damaged as a cut one (zstd takes
// it for no frames, nothing).
func unpack(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, errors.New("the file is empty")
	}
	d, err := decoder()
	if err != nil {
		return nil, err
	}
	out, err := d.DecodeAll(b, nil)
	if err == nil && len(out) == 0 {
		err = errors.New("it holds no bytes")
	}
	return out, err
}

// storedPath is where the body stored as name lies, for messages.
func (a *Artifact) storedPath(name string) string {
	if a.dir != "" {
		return filepath.Join(a.dir, name)
	}
	return "kernels/build/" + name
}

// remedy is what to do about an artifact that cannot be read.
func (a *Artifact) remedy() string {
	if a.dir != "" {
		return rebuild
	}
	return "rebuild the kernels with scripts/build-kernels.sh"
}

// Packed is one kernel body Pack compressed.
type Packed struct {
	File        string // as its sidecar names it
	Size, After int64  // bytes before and after
}

// Pack stores compressed, as FILE.zst, every kernel body in dir that a sidecar there
// names and that lies there plain, and removes FILE: how a build's output becomes what
// the binary embeds (scripts/build-kernels.sh runs it through symmem kernels pack).
// Each body is checked against its sidecar's sha256 before it is replaced, and the
// compressed copy is read back. Bodies already compressed are left as they are.
func Pack(dir string) ([]Packed, error) {
	c, err := Load(os.DirFS(dir))
	if err != nil {
		return nil, err
	}
	var enc *zstd.Encoder
	var done []Packed
	seen := map[string]bool{}
	for _, a := range c.Artifacts {
		a.dir = dir
		if seen[a.File] {
			continue // a CUDA module that several kernels' sidecars name
		}
		seen[a.File] = true
		if a.File != filepath.Base(a.File) {
			return done, fmt.Errorf("kernel %s: file %q must lie beside its sidecar", a.Name(), a.File)
		}
		if name, err := a.stored(); err == nil && name != a.File {
			continue // compressed already
		}
		plain, err := a.body() // a missing one is named here
		if err == nil {
			err = a.check(plain)
		}
		if err != nil {
			return done, err
		}
		if enc == nil {
			// The best level: 7.4 MB of symmem's kernels where the default leaves 8.4,
			// for a second or two at the build; they still decompress at 0.6-2 GB/s
			// (BenchmarkUnpack).
			if enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1)); err != nil {
				return done, err
			}
		}
		packed := enc.EncodeAll(plain, nil)
		if back, err := unpack(packed); err != nil || string(back) != string(plain) {
			return done, fmt.Errorf("kernel %s: its compressed copy does not read back (%v): nothing was replaced", a.Name(), err)
		}
		p := filepath.Join(dir, a.File)
		if err := writeFile(p+PackedSuffix, packed); err != nil {
			return done, fmt.Errorf("kernel %s: %w", a.Name(), err)
		}
		if err := os.Remove(p); err != nil {
			return done, fmt.Errorf("kernel %s: %w", a.Name(), err)
		}
		done = append(done, Packed{File: a.File, Size: int64(len(plain)), After: int64(len(packed))})
	}
	return done, nil
}

// check compares the artifact's bytes with the hash its sidecar records.
func (a *Artifact) check(b []byte) error {
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != a.SHA256 {
		return fmt.Errorf("kernel %s: %s has sha256 %s, metadata says %s", a.Name(), a.File, short(got), short(a.SHA256))
	}
	return nil
}

// writeFile writes name whole or not at all: a build stopped half-way leaves no
// truncated body behind that would pass for one.
func writeFile(name string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".pack-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
