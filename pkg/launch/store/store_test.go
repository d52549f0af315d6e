package store

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

func TestSetGetAddBarrier(t *testing.T) {
	s, err := Listen("127.0.0.1:0", "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const n = 4
	var wg sync.WaitGroup
	got := make([]string, n)
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			c, err := Dial(ctx, s.Addr(), "tok")
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			if r == 0 {
				time.Sleep(20 * time.Millisecond) // the others must wait for the key
				c.Set(ctx, "uid", []byte("hello"))
			}
			v, err := c.Get(ctx, "uid")
			if err != nil {
				t.Error(err)
			}
			got[r] = string(v)
			if err := c.Barrier(ctx, "b", n); err != nil {
				t.Error(err)
			}
		}(r)
	}
	wg.Wait()
	for r, v := range got {
		if v != "hello" {
			t.Errorf("rank %d got %q", r, v)
		}
	}
}

func TestBadTokenRefused(t *testing.T) {
	s, err := Listen("127.0.0.1:0", "right")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := Dial(ctx, s.Addr(), "wrong"); err == nil {
		t.Fatal("a client with the wrong token joined")
	}
}

func TestCloseUnblocksWaiters(t *testing.T) {
	s, _ := Listen("127.0.0.1:0", "t")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, s.Addr(), "t")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error)
	go func() { _, err := c.Get(ctx, "never"); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	s.Close()
	if err := <-errc; err == nil {
		t.Fatal("Get returned no error after the store closed")
	}
}

// A store that takes the connection and never answers the greeting (its process
// stopped) is ErrSilent after the Dialer's Silence; without one, only the deadline ends
// the wait.
func TestDialerSilence(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn // held open, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err = Dialer{Silence: 300 * time.Millisecond}.Dial(ctx, ln.Addr().String(), "tok")
	if !errors.Is(err, ErrSilent) || time.Since(start) > 3*time.Second {
		t.Fatalf("Dial with Silence 300ms: %v after %s, want ErrSilent soon after 300ms", err, time.Since(start))
	}
	short, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if _, err = Dial(short, ln.Addr().String(), "tok"); err == nil || errors.Is(err, ErrSilent) {
		t.Fatalf("Dial without Silence: %v, want the deadline's error", err)
	}
}
