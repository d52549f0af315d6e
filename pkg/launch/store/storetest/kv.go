// Package storetest is the rendezvous store in memory, for tests of what exchanges
// keys through it (NVSHMEM's and NCCL's unique IDs): Get blocks until the key is set.
package storetest

import (
	"context"
	"sync"
)

// KV is a key-value store in memory with the store client's Set and Get.
type KV struct {
	mu      sync.Mutex
	m       map[string][]byte
	changed chan struct{}
}

// New returns an empty KV.
func New() *KV { return &KV{m: map[string][]byte{}, changed: make(chan struct{})} }

// Set stores a copy of v under key and wakes every Get.
func (kv *KV) Set(ctx context.Context, key string, v []byte) error {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.m[key] = append([]byte(nil), v...)
	close(kv.changed)
	kv.changed = make(chan struct{})
	return nil
}

// Get returns key's value once it is set, or ctx's error.
func (kv *KV) Get(ctx context.Context, key string) ([]byte, error) {
	for {
		kv.mu.Lock()
		v, ok := kv.m[key]
		changed := kv.changed
		kv.mu.Unlock()
		if ok {
			return v, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
