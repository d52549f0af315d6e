package ops

import (
	"bytes"
	"strings"
	"testing"

	"github.com/symmem/symmem/pkg/backend"
)

func TestDTypesRoundTrip(t *testing.T) {
	for name, v := range map[string]float64{"int8": -5, "uint8": 200, "int16": -300, "int32": 1 << 20, "int64": -1 << 40,
		"float16": 1.5, "bf16": -2.5, "float32": 0.1, "float64": 1e300} {
		d, err := LookupDType(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := d.Encode(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := strings.TrimSuffix(strings.TrimSuffix(formatFloat(v, d), ".0"), "")
		if got := d.Format(b); got != want {
			t.Errorf("%s(%g) prints %s, want %s", name, v, got, want)
		}
	}
	d, _ := LookupDType("int8")
	if _, err := d.Encode(128); err == nil {
		t.Error("int8 accepted 128")
	}
}

func formatFloat(v float64, d DType) string {
	b, _ := d.Encode(v)
	return d.Format(b)
}

func TestValidate(t *testing.T) {
	s := Spec{Op: "put", DType: "int8", Count: 8, Value: 5, Peer: 1}
	if err := s.Validate(2); err != nil || s.Pattern != "pair" {
		t.Fatalf("Validate = %v, pattern %q", err, s.Pattern)
	}
	s = Spec{Op: "put", DType: "int8", Count: 8, Value: 125, Peer: 1}
	if err := s.Validate(4); err == nil || !strings.Contains(err.Error(), "rank 3") {
		t.Errorf("a ring value past int8 was accepted or named wrongly: %v", err)
	}
}

// fakeBackend delivers puts into a map of per-rank heaps in one process, and can be
// told to drop or corrupt data, so the checks are seen to fail when they must.
type fakeBackend struct {
	rank, size int
	heaps      [][]byte
	alloc      backend.Bump
	corrupt    bool
}

func (f *fakeBackend) Name() string                          { return "fake" }
func (f *fakeBackend) Rank() int                             { return f.rank }
func (f *fakeBackend) Size() int                             { return f.size }
func (f *fakeBackend) Alloc(n int64) (backend.Buffer, error) { return f.alloc.Alloc(n) }
func (f *fakeBackend) region(r int, b backend.Buffer) []byte { return f.heaps[r][b.Off : b.Off+b.Size] }
func (f *fakeBackend) Write(b backend.Buffer, d []byte) error {
	copy(f.region(f.rank, b), d)
	return nil
}
func (f *fakeBackend) Read(b backend.Buffer, out []byte) error {
	copy(out, f.region(f.rank, b))
	return nil
}
func (f *fakeBackend) Quiet() error   { return nil }
func (f *fakeBackend) Barrier() error { return nil }
func (f *fakeBackend) Close() error   { return nil }
func (f *fakeBackend) Get(d, s backend.Buffer, p int, _ backend.Launch) error {
	copy(f.region(f.rank, d), f.region(p, s))
	return nil
}
func (f *fakeBackend) Put(d, s backend.Buffer, p int, _ backend.Launch) error {
	copy(f.region(p, d), f.region(f.rank, s))
	if f.corrupt {
		f.region(p, d)[2] ^= 0xff
	}
	return nil
}
func (f *fakeBackend) PutSignal(d, s, sig backend.Buffer, p int, l backend.Launch) error {
	return f.Put(d, s, p, l)
}
func (f *fakeBackend) WaitSignal(backend.Buffer, int64, int, backend.Launch) error { return nil }

func TestRunDetectsWrongData(t *testing.T) {
	for _, corrupt := range []bool{false, true} {
		heaps := [][]byte{make([]byte, 4096), make([]byte, 4096)}
		spec := Spec{Op: "put", DType: "int8", Count: 8, Value: 5, Peer: 1}
		if err := spec.Validate(2); err != nil {
			t.Fatal(err)
		}
		// Rank 1 sets up its buffers first (its dst starts as the complement), then
		// rank 0 puts into it, then rank 1 checks: run them in that order by hand.
		r1 := &fakeBackend{rank: 1, size: 2, heaps: heaps, alloc: backend.Bump{Limit: 4096}}
		r0 := &fakeBackend{rank: 0, size: 2, heaps: heaps, alloc: backend.Bump{Limit: 4096}, corrupt: corrupt}
		// Fill rank 1 first, then let rank 0 run (put), then rank 1 again only to read.
		var out bytes.Buffer
		if _, err := Run(r1, spec, &out); err != nil {
			t.Fatal(err)
		}
		if _, err := Run(r0, spec, &out); err != nil {
			t.Fatal(err)
		}
		r1.alloc = backend.Bump{Limit: 4096}
		dst := backend.Buffer{Off: 256, Size: 8}
		got := make([]byte, 8)
		r1.Read(dst, got)
		d, _ := LookupDType("int8")
		want, _ := d.Encode(5)
		wrong := countWrong(got, want)
		if corrupt && wrong != 1 || !corrupt && wrong != 0 {
			t.Errorf("corrupt=%v: %d wrong elements", corrupt, wrong)
		}
	}
}

func TestCountWrong(t *testing.T) {
	want := []byte{1, 2, 3, 4}
	got := bytes.Repeat(want, 100000)
	if n := countWrong(got, want); n != 0 {
		t.Fatalf("%d wrong in a clean buffer", n)
	}
	got[5] = 9       // element 1
	got[399999] = 0  // last element
	got[50000*4] = 7 // element 50000
	if n := countWrong(got, want); n != 3 {
		t.Fatalf("%d wrong, want 3", n)
	}
}
