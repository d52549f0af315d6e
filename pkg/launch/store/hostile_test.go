package store

// Tests for a hostile neighbour on the same host: every case runs against a live server
// on 127.0.0.1.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// listen starts a server on 127.0.0.1 through wrap (nil: the plain listener).
func listen(t *testing.T, token string, opt Options, wrap func(net.Listener) net.Listener) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	s := Serve(ln, token, opt)
	t.Cleanup(func() { s.Close() })
	return s
}

func rawDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// expectClosed reads (and drops) whatever c receives until the server closes it, and
// fails if that has not happened within d.
func expectClosed(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c) // nil at EOF; a reset is an error, and closed too
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v", d)
	}
}

// waitFor polls cond for up to 2 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (s *Server) unauthenticated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unauth.len()
}

func dialOK(t *testing.T, addr, token string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip checks that an authenticated client can still use the store.
func roundTrip(t *testing.T, c *Client, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Set(ctx, key, []byte("v-"+key)); err != nil {
		t.Fatal(err)
	}
	v, err := c.Get(ctx, key)
	if err != nil || string(v) != "v-"+key {
		t.Fatalf("Get(%q) = %q, %v", key, v, err)
	}
}

// countingListener counts the bytes the server reads from its connections.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.n}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func TestOversizedHelloRefused(t *testing.T) {
	var read atomic.Int64
	// The default deadline (5 s) is far off: the line's size alone must close it.
	s := listen(t, "tok", Options{}, func(ln net.Listener) net.Listener { return countingListener{ln, &read} })
	c := rawDial(t, s.Addr())
	payload := append([]byte(`{"op":"hello","token":"`), bytes.Repeat([]byte("a"), 1<<20)...) // no end
	go c.Write(payload)                                                                       // fails once the server closes
	expectClosed(t, c, 1500*time.Millisecond)
	// It buffered no more than the limit and a read's worth of the megabyte.
	if n := read.Load(); n > DefaultMaxAuthMessage+64<<10 {
		t.Fatalf("the server read %d bytes of an unauthenticated line (limit %d)", n, DefaultMaxAuthMessage)
	}
	waitFor(t, "the connection to be released", func() bool { return s.unauthenticated() == 0 })
	roundTrip(t, dialOK(t, s.Addr(), "tok"), "after")
}

func TestOversizedMessageAfterAuth(t *testing.T) {
	const limit = 64 << 10
	s := listen(t, "tok", Options{MaxMessage: limit}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	// Base64 makes 3 bytes 4: this value fits, the next one does not.
	c := dialOK(t, s.Addr(), "tok")
	if err := c.Set(ctx, "fits", make([]byte, limit/2)); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "big", make([]byte, limit)); !errors.Is(err, ErrLost) {
		t.Fatalf("Set over the limit: %v, want the connection dropped", err)
	}
	if _, ok := s.Value("big"); ok {
		t.Fatal("the server stored a message over its limit")
	}
	roundTrip(t, dialOK(t, s.Addr(), "tok"), "after")
}

func TestLargeResultFitsDefaultLimit(t *testing.T) {
	s := listen(t, "tok", Options{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := dialOK(t, s.Addr(), "tok")
	big := bytes.Repeat([]byte(`{"op":"put","bytes":1048576,"gbps":123.456},`), 7000) // 300 KB of rows (more is slow under -race)
	if err := c.Set(ctx, "result/0", big); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Value("result/0"); !ok || !bytes.Equal(v, big) {
		t.Fatal("a large result did not arrive intact")
	}
}

func TestClientRefusesOversizedValue(t *testing.T) {
	defer func(n int) { clientMaxMessage = n }(clientMaxMessage)
	clientMaxMessage = 1 << 10
	s := listen(t, "tok", Options{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c := dialOK(t, s.Addr(), "tok")
	err := c.Set(ctx, "result/0", make([]byte, 2<<10))
	if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrLost) {
		t.Fatalf("Set over the client's limit: %v, want ErrTooLarge", err)
	}
	roundTrip(t, c, "same-connection") // nothing was sent: the connection is fine
}

func TestSilentConnectionClosedAfterAuthTimeout(t *testing.T) {
	const timeout = 150 * time.Millisecond
	s := listen(t, "tok", Options{AuthTimeout: timeout}, nil)
	start := time.Now() // the deadline runs from later: from the accept
	silent := rawDial(t, s.Addr())
	trickle := rawDial(t, s.Addr())
	go func() { // a byte at a time does not reset the deadline
		for _, b := range []byte(`{"op":"hello","token":"tok"}`) {
			if _, err := trickle.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	expectClosed(t, silent, 1500*time.Millisecond)
	if d := time.Since(start); d < timeout {
		t.Fatalf("closed after %v, before the deadline", d)
	}
	expectClosed(t, trickle, 1500*time.Millisecond)
	waitFor(t, "the connections to be released", func() bool { return s.unauthenticated() == 0 })

	// Once in, a client is not held to the deadline.
	c := dialOK(t, s.Addr(), "tok")
	time.Sleep(2 * timeout)
	roundTrip(t, c, "idle")
}

// The cap on connections that have not presented the token holds, and a newcomer makes
// room by closing the one that has waited longest.
func TestUnauthenticatedCap(t *testing.T) {
	const limit = 4
	s := listen(t, "tok", Options{MaxUnauthenticated: limit, AuthTimeout: 10 * time.Second}, nil)
	var held []net.Conn
	for i := 0; i < limit; i++ {
		held = append(held, rawDial(t, s.Addr()))
		waitFor(t, "the server to accept a held connection", func() bool { return s.unauthenticated() == i+1 })
	}
	rawDial(t, s.Addr())
	expectClosed(t, held[0], time.Second)
	waitFor(t, "the cap to hold", func() bool { return s.unauthenticated() == limit && s.Crowded() == 1 })
	roundTrip(t, dialOK(t, s.Addr(), "tok"), "after")
	if n := s.unauthenticated(); n > limit {
		t.Fatalf("%d connections wait for their token, the cap is %d", n, limit)
	}
}

// A local process that holds every slot open and re-dials each one dropped kept a
// rank out until it stopped (torchrun's rank 1 gave up after 60 s). The rank joins
// while the flood goes on, and the store says it was crowded.
func TestFloodDoesNotKeepARankOut(t *testing.T) {
	const limit = 8
	s := listen(t, "tok", Options{MaxUnauthenticated: limit, AuthTimeout: 10 * time.Second}, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4*limit; i++ {
		wg.Add(1)
		go func() { // hold a connection open; when it is dropped, dial again
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
				if err != nil {
					continue
				}
				go func() { <-stop; c.Close() }()
				io.Copy(io.Discard, c)
				c.Close()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	waitFor(t, "the flood to fill the slots", func() bool { return s.Crowded() > 0 })
	// Each of the rank's dials is admitted, and must present its token before eight
	// newer connections push it out: under -race on two busy cores that can take a
	// few tries. A store that refused the newest instead never lets it in.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, s.Addr(), "tok")
	if err != nil {
		t.Fatalf("Dial during the flood: %v", err)
	}
	defer c.Close()
	roundTrip(t, c, "during")
}

func TestManyConnectionsOpenedAndDropped(t *testing.T) {
	s := listen(t, "tok", Options{}, nil)
	junk := []string{"", "\n", "{", `{"op":"hello","token":"wrong"}` + "\n", "\x00\xff\n", `{"op":"get","key":"k"}` + "\n"}
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
			if err != nil {
				return // the backlog may overflow; that is the point
			}
			c.Write([]byte(junk[i%len(junk)]))
			c.Close()
		}(i)
	}
	wg.Wait()
	roundTrip(t, dialOK(t, s.Addr(), "tok"), "after")
	waitFor(t, "the dropped connections to be released", func() bool { return s.unauthenticated() == 0 })
}

// flakyListener fails Accept with EMFILE, as a process out of file descriptors does,
// while fail says so.
type flakyListener struct {
	net.Listener
	fail   func(n int) bool // n counts the calls from 1
	calls  atomic.Int64
	errors atomic.Int64
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fail(int(l.calls.Add(1))) {
		l.errors.Add(1)
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

func TestAcceptErrorsDoNotStopServer(t *testing.T) {
	fl := &flakyListener{fail: func(n int) bool { return n <= 3 }}
	s := listen(t, "tok", Options{}, func(ln net.Listener) net.Listener { fl.Listener = ln; return fl })
	// The errors come first, before anyone dials; the connection waits in the backlog.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	c, err := Dial(ctx, s.Addr(), "tok")
	if err != nil {
		t.Fatalf("Dial after %d accept errors: %v", fl.errors.Load(), err)
	}
	defer c.Close()
	roundTrip(t, c, "after-errors")
	if n := fl.errors.Load(); n != 3 {
		t.Fatalf("%d accept errors, want 3", n)
	}
}

func TestAcceptBacksOff(t *testing.T) {
	fl := &flakyListener{fail: func(int) bool { return true }}
	listen(t, "tok", Options{}, func(ln net.Listener) net.Listener { fl.Listener = ln; return fl })
	time.Sleep(200 * time.Millisecond) // 5+10+20+40+80 ms: about 6 attempts
	if n := fl.errors.Load(); n > 20 {
		t.Fatalf("%d accept attempts in 200 ms: no backoff", n)
	}
}

func TestCloseDuringAcceptBackoff(t *testing.T) {
	defer func(lo, hi time.Duration) { minAcceptDelay, maxAcceptDelay = lo, hi }(minAcceptDelay, maxAcceptDelay)
	minAcceptDelay, maxAcceptDelay = time.Minute, time.Minute
	fl := &flakyListener{fail: func(int) bool { return true }}
	s := listen(t, "tok", Options{}, func(ln net.Listener) net.Listener { fl.Listener = ln; return fl })
	waitFor(t, "an accept error", func() bool { return fl.errors.Load() > 0 })
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Close waited out the accept backoff")
	}
}

func TestWrongTokenRefused(t *testing.T) {
	s := listen(t, "right", Options{}, nil)
	for _, tok := range []string{"", "r", "righ", "right ", "rightt", "RIGHT", strings.Repeat("x", 1000)} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := Dial(ctx, s.Addr(), tok)
		cancel()
		if err == nil {
			c.Close()
			t.Fatalf("token %q joined", tok)
		}
		if !strings.Contains(err.Error(), "bad token") {
			t.Fatalf("token %q: %v, want a refusal", tok, err)
		}
	}
	// No request is served before the token.
	c := rawDial(t, s.Addr())
	c.Write([]byte(`{"op":"set","key":"k","value":"dg=="}` + "\n" + `{"op":"hello","token":"right"}` + "\n"))
	expectClosed(t, c, time.Second)
	if _, ok := s.Value("k"); ok {
		t.Fatal("a set before the token was served")
	}
	roundTrip(t, dialOK(t, s.Addr(), "right"), "after")
}

func TestAuthenticatedOps(t *testing.T) {
	s := listen(t, "tok", Options{AuthTimeout: 100 * time.Millisecond}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const n = 3
	clients := make([]*Client, n)
	for i := range clients {
		clients[i] = dialOK(t, s.Addr(), "tok")
	}
	for i, c := range clients {
		got, err := c.Add(ctx, "ctr", 2)
		if err != nil || got != int64(2*(i+1)) {
			t.Fatalf("Add = %d, %v", got, err)
		}
	}
	if err := clients[0].WaitCount(ctx, "ctr", 2*n); err != nil {
		t.Fatal(err)
	}
	if s.Counter("ctr") != 2*n {
		t.Fatalf("Counter = %d", s.Counter("ctr"))
	}
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 0 {
				time.Sleep(150 * time.Millisecond) // past the auth deadline: it must not apply now
				if err := c.Set(ctx, "k", []byte("v")); err != nil {
					t.Error(err)
				}
			}
			if v, err := c.Get(ctx, "k"); err != nil || string(v) != "v" {
				t.Errorf("Get = %q, %v", v, err)
			}
			if err := c.Barrier(ctx, "b", n); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}
