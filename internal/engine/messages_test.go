package engine

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/pkg/launch"
	"github.com/symmem/symmem/pkg/launch/store"
)

// A rank whose rank 0 never started says so, with the address and how long it waited;
// its last line blamed rank 0's token file (store token: lstat F: no such file).
func TestNoRank0SaysSo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	info := launch.RankInfo{Rank: 1, WorldSize: 2, LocalWorldSize: 2, StoreAddr: addr, AddrFrom: "store-addr",
		TokenFile: filepath.Join(t.TempDir(), "job-x.token"), Source: "torchrun", JobID: "x"}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, _, err = dialToken(ctx, info, 0)
	if err == nil || !strings.HasPrefix(err.Error(), "rank 1: no rank 0 answered at "+addr+" within ") || strings.Contains(err.Error(), "lstat") {
		t.Fatalf("got %v; want that no rank 0 answered at %s", err, addr)
	}
}

// Rank 0 whose ranks did not all join says when connections that presented no token
// crowded its store: with a flood on its port both ranks blamed each other.
func TestCrowdedStoreSaysSo(t *testing.T) {
	srv, err := store.ListenOptions("127.0.0.1:0", "tok", store.Options{MaxUnauthenticated: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if crowded(srv) != "" {
		t.Fatalf("a quiet store: %q", crowded(srv))
	}
	for range 2 {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	for deadline := time.Now().Add(2 * time.Second); srv.Crowded() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second connection did not make room")
		}
	}
	if msg := crowded(srv); !strings.Contains(msg, "closed 1 connections that presented no token, to make room") {
		t.Fatalf("got %q", msg)
	}
}
