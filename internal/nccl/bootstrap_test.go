package nccl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symmem/symmem/pkg/launch/store/storetest"
)

func newKV() *storetest.KV { return storetest.New() }

// Rank 0 makes the ID once; ranks that ask before it is set wait for it.
func TestShareID(t *testing.T) {
	kv := newKV()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	made := 0
	newID := func() (UniqueID, error) {
		made++
		var id UniqueID
		for i := range id {
			id[i] = byte(i ^ 0x5a)
		}
		return id, nil
	}
	const n = 4
	ids := make([]UniqueID, n)
	errs := make([]error, n)
	asked := askedKV{kv, make(chan struct{}, n)}
	var wg sync.WaitGroup
	for r := n - 1; r >= 1; r-- { // the others first: they must wait
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			ids[r], errs[r] = ShareID(ctx, asked, IDKey("bench"), r, func() (UniqueID, error) { panic("rank " + fmt.Sprint(r) + " made an ID") })
		}(r)
	}
	for range n - 1 { // until each of them has found no ID
		select {
		case <-asked.missed:
		case <-ctx.Done():
			t.Fatal("ranks 1 to 3 did not all ask for the ID within 10 s")
		}
	}
	ids[0], errs[0] = ShareID(ctx, asked, IDKey("bench"), 0, newID)
	wg.Wait()
	want, _ := newID()
	for r := range ids {
		if errs[r] != nil || ids[r] != want {
			t.Errorf("rank %d: %v, id[:4] %x", r, errs[r], ids[r][:4])
		}
	}
	if made != 2 { // rank 0's, and want's
		t.Errorf("newID called %d times", made)
	}
	if IDKey("") != "nccl/uid" || IDKey("bench") != "nccl/uid/bench" {
		t.Errorf("keys %q %q", IDKey(""), IDKey("bench"))
	}
}

// askedKV is a KV that tells missed of each Get that finds its key not set yet, and
// so waits for it.
type askedKV struct {
	*storetest.KV
	missed chan struct{}
}

func (a askedKV) Get(ctx context.Context, key string) ([]byte, error) {
	now, cancel := context.WithCancel(ctx)
	cancel() // a Get that does not wait: the value, or at once an error
	if v, err := a.KV.Get(now, key); err == nil {
		return v, nil
	}
	a.missed <- struct{}{}
	return a.KV.Get(ctx, key)
}

func TestShareIDErrors(t *testing.T) {
	ctx := context.Background()
	kv := newKV()
	kv.Set(ctx, "short", []byte{1, 2, 3})
	if _, err := ShareID(ctx, kv, "short", 1, nil); err == nil || !strings.Contains(err.Error(), "3 bytes, want 128") {
		t.Errorf("short ID: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := ShareID(cctx, kv, "never", 1, nil); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "rank 0's NCCL unique ID") {
		t.Errorf("cancelled wait: %v", err)
	}
	boom := errors.New("boom")
	if _, err := ShareID(ctx, kv, "k", 0, func() (UniqueID, error) { return UniqueID{}, boom }); !errors.Is(err, boom) {
		t.Errorf("newID's error: %v", err)
	}
	gone, stop := context.WithTimeout(ctx, 20*time.Millisecond)
	defer stop()
	if _, err := kv.Get(gone, "k"); err == nil {
		t.Error("rank 0 published an ID it failed to make")
	}
}

// Bootstrap through the fake library: rank 0's ncclGetUniqueId bytes reach every
// rank's ncclCommInitRank.
func TestBootstrap(t *testing.T) {
	f := openFake(t)
	kv := newKV()
	ctx := context.Background()
	var comms []*Comm
	for r := 0; r < 3; r++ { // one after another: the fake's log is not thread-safe
		c, err := f.Bootstrap(ctx, kv, "", r, 3)
		if err != nil {
			t.Fatal(err)
		}
		comms = append(comms, c)
	}
	var id UniqueID
	for i := range id {
		id[i] = byte(i*7 + 3)
	}
	got := f.calls()
	want := []string{"ncclGetUniqueId"}
	for r := 0; r < 3; r++ {
		want = append(want, fmt.Sprintf("ncclCommInitRank(nranks=3, id=%s, rank=%d)", idSum(id), r))
	}
	if len(got) != len(want) {
		t.Fatalf("calls:\n%s", strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("call %d: %s\nwant %s", i, got[i], want[i])
		}
	}
	for _, c := range comms {
		c.Destroy()
	}
}
