//go:build gpu

// GPU tests: built here with `go test -c -tags gpu -o bin/nccl-gpu.test ./internal/nccl`
// and run on a machine with GPUs and NCCL (SYMMEM_NCCL_LIB or the usual search). They
// run every rank in this process, one goroutine locked to its OS thread per GPU, which
// NCCL allows (one communicator per thread and device).
package nccl

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/cuda"
)

func openReal(t *testing.T) (*Lib, *cuda.Driver, int) {
	t.Helper()
	s := Find(os.Getenv("SYMMEM_NCCL_LIB"))
	if s.Chosen == "" {
		t.Fatalf("NCCL not found (tried %v): %s", s.Tried, InstallHint)
	}
	l, err := Open(s.Chosen)
	if err != nil {
		t.Fatal(err)
	}
	d, err := cuda.Open()
	if err != nil {
		t.Fatal(err)
	}
	n, err := d.DeviceCount()
	if err != nil || n == 0 {
		t.Fatalf("GPUs: %d, %v", n, err)
	}
	t.Logf("NCCL %s from %s via %s; %d GPUs", l.Version(), l.Path, s.Source, n)
	return l, d, min(n, 2)
}

// onRanks runs f on n ranks at once, each on its own locked thread with its GPU's
// context current and its communicator made through Bootstrap.
func onRanks(t *testing.T, l *Lib, d *cuda.Driver, n int, f func(t *testing.T, c *Comm, ctx *cuda.Context)) {
	t.Helper()
	kv := newKV()
	bg, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			ctx, err := d.Retain(r) // locks this goroutine to its thread
			if err != nil {
				t.Error(err)
				return
			}
			c, err := l.Bootstrap(bg, kv, t.Name(), r, n)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Destroy()
			f(t, c, ctx)
		}(r)
	}
	wg.Wait()
}

func f32s(vals []float32) []byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// Every rank sends rank+1+i at element i; the sum is n(n+1)/2 + n*i everywhere.
func TestGPUAllReduce(t *testing.T) {
	l, d, n := openReal(t)
	const count = 1<<20 + 3
	onRanks(t, l, d, n, func(t *testing.T, c *Comm, ctx *cuda.Context) {
		in := make([]float32, count)
		for i := range in {
			in[i] = float32(c.Rank() + 1 + i%1000)
		}
		send, _ := ctx.Alloc(4 * count)
		recv, _ := ctx.Alloc(4 * count)
		defer ctx.Free(send)
		defer ctx.Free(recv)
		if err := ctx.CopyHtoD(send, f32s(in)); err != nil {
			t.Error(err)
			return
		}
		if err := c.AllReduce(uintptr(send), uintptr(recv), count, Float32, Sum, 0); err != nil {
			t.Error(err)
			return
		}
		if err := ctx.Synchronize(); err != nil {
			t.Error(err)
			return
		}
		out := make([]byte, 4*count)
		ctx.CopyDtoH(out, recv)
		wrong := 0
		for i := 0; i < count; i++ {
			want := float32(n*(n+1)/2 + n*(i%1000))
			if got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])); got != want {
				if wrong == 0 {
					t.Errorf("rank %d element %d = %v, want %v", c.Rank(), i, got, want)
				}
				wrong++
			}
		}
		if wrong > 0 {
			t.Errorf("rank %d: %d of %d elements wrong", c.Rank(), wrong, count)
		}
	})
}

// All-to-all: block p of rank r's send is tagged (r, p); rank p must find (r, p) in
// block r of its receive buffer.
func TestGPUAllToAll(t *testing.T) {
	l, d, n := openReal(t)
	const count = 4096 // int32 per block
	onRanks(t, l, d, n, func(t *testing.T, c *Comm, ctx *cuda.Context) {
		in := make([]byte, 4*count*n)
		for p := 0; p < n; p++ {
			for i := 0; i < count; i++ {
				binary.LittleEndian.PutUint32(in[4*(p*count+i):], uint32(c.Rank()<<24|p<<16|i))
			}
		}
		send, _ := ctx.Alloc(uint64(len(in)))
		recv, _ := ctx.Alloc(uint64(len(in)))
		defer ctx.Free(send)
		defer ctx.Free(recv)
		ctx.CopyHtoD(send, in)
		if err := c.AllToAll(uintptr(send), uintptr(recv), count, Int32, 0); err != nil {
			t.Error(err)
			return
		}
		if err := ctx.Synchronize(); err != nil {
			t.Error(err)
			return
		}
		out := make([]byte, len(in))
		ctx.CopyDtoH(out, recv)
		for r := 0; r < n; r++ {
			for i := 0; i < count; i++ {
				want := uint32(r<<24 | c.Rank()<<16 | i)
				if got := binary.LittleEndian.Uint32(out[4*(r*count+i):]); got != want {
					t.Errorf("rank %d block %d element %d = %#x, want %#x", c.Rank(), r, i, got, want)
					return
				}
			}
		}
	})
}
