package cpu

import (
	"bytes"
	"sync"
	"testing"

	"github.com/symmem/symmem/internal/backend"
)

// Two ranks in one process, each with its own mapping of the same file.
func TestPutGetSignalBarrier(t *testing.T) {
	ShmDir = t.TempDir()
	path := HeapPath("t")
	if err := Create(path, 2, 1<<16); err != nil {
		t.Fatal(err)
	}
	var ranks [2]*Backend
	for r := range ranks {
		b, err := Open(path, r, 2, 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		ranks[r] = b
	}
	var bufs [2][3]backend.Buffer
	for r, b := range ranks {
		for i, n := range []int64{1000, 1000, 8} {
			buf, err := b.Alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			bufs[r][i] = buf
		}
	}
	if bufs[0] != bufs[1] {
		t.Fatal("the heap is not carved alike on both ranks")
	}
	src, dst, sig := bufs[0][0], bufs[0][1], bufs[0][2]
	data := bytes.Repeat([]byte("symmem!"), 143)[:1000]
	ranks[0].Write(src, data)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // rank 1 waits for the signal, then reads
		defer wg.Done()
		ranks[1].WaitSignal(sig, 1000, 1, backend.Launch{})
		got := make([]byte, 1000)
		ranks[1].Read(dst, got)
		if !bytes.Equal(got, data) {
			t.Error("put-signal: data not there after the signal")
		}
		ranks[1].Barrier()
	}()
	go func() {
		defer wg.Done()
		if err := ranks[0].PutSignal(dst, src, sig, 1, backend.Launch{}); err != nil {
			t.Error(err)
		}
		ranks[0].Barrier()
	}()
	wg.Wait()
	// get: rank 1 fetches rank 0's source.
	got, _ := ranks[1].Alloc(1000)
	ranks[0].Alloc(1000)
	if err := ranks[1].Get(got, src, 0, backend.Launch{}); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 1000)
	ranks[1].Read(got, out)
	if !bytes.Equal(out, data) {
		t.Error("get returned other data")
	}
	if err := ranks[0].Put(dst, src, 2, backend.Launch{}); err == nil {
		t.Error("a put to rank 2 of 2 was accepted")
	}
	if _, err := ranks[0].Alloc(1 << 20); err == nil {
		t.Error("an allocation past the heap was accepted")
	}
}
