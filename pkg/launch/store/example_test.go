package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/symmem/symmem/pkg/launch/store"
)

// A launcher hosts the store; two ranks dial it with the job's token, rank 0 hands rank
// 1 a value (as it hands out NVSHMEM's unique ID), and both meet at a barrier.
func Example() {
	ctx := context.Background()
	token := store.NewToken()
	srv, err := store.Listen("127.0.0.1:0", token)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	var wg sync.WaitGroup
	got := make([]string, 2)
	for rank := range 2 {
		wg.Go(func() {
			c, err := store.Dial(ctx, srv.Addr(), token)
			if err != nil {
				got[rank] = err.Error()
				return
			}
			defer c.Close()
			if rank == 0 {
				c.Set(ctx, "uid", []byte("from rank 0"))
			}
			v, _ := c.Get(ctx, "uid") // waits until rank 0 has set it
			if err := c.Barrier(ctx, "ready", 2); err != nil {
				got[rank] = err.Error()
				return
			}
			got[rank] = string(v)
		})
	}
	wg.Wait()
	fmt.Println(got)

	// A process without the token is turned away.
	_, err = store.Dial(ctx, srv.Addr(), "not the token")
	fmt.Println(errors.Is(err, store.ErrRefused))
	// Output:
	// [from rank 0 from rank 0]
	// true
}
