// Package store is the rendezvous store that joins a job's ranks: a small key-value
// server on TCP that the launcher (or rank 0 under an external launcher) hosts, and the
// client every rank uses to exchange the NVSHMEM unique ID, meet at barriers and report
// results.
//
// The wire format is one JSON object per line. A client must first present the job's
// token; a connection that does not is closed, so a stray process on the same host
// cannot join or read the job.
package store

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

type request struct {
	Op    string `json:"op"`
	Token string `json:"token,omitempty"`
	Key   string `json:"key,omitempty"`
	Value []byte `json:"value,omitempty"`
	Delta int64  `json:"delta,omitempty"`
	N     int64  `json:"n,omitempty"`
}

type response struct {
	OK    bool   `json:"ok"`
	Err   string `json:"err,omitempty"`
	Value []byte `json:"value,omitempty"`
	N     int64  `json:"n,omitempty"`
}

// NewToken returns a random per-job token.
func NewToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// Server is a store listening on one address.
type Server struct {
	ln    net.Listener
	token string

	mu       sync.Mutex
	values   map[string][]byte
	counters map[string]int64
	changed  chan struct{} // closed and replaced on every change
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// Listen starts a store on addr ("127.0.0.1:0" picks a free port).
func Listen(addr, token string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rendezvous store: listen on %s: %w", addr, err)
	}
	s := &Server{
		ln: ln, token: token,
		values:   map[string][]byte{},
		counters: map[string]int64{},
		changed:  make(chan struct{}),
		conns:    map[net.Conn]struct{}{},
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address clients dial.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Value returns a key's value if it is set; the launcher reads results this way.
func (s *Server) Value(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[key]
	return v, ok
}

// Counter returns a counter's value (0 when unset); the launcher reads progress this way.
func (s *Server) Counter(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters[key]
}

// Close stops the server and drops every client; blocked calls fail.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	dec := json.NewDecoder(bufio.NewReader(c))
	enc := json.NewEncoder(c)
	authed := false
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			return
		}
		if !authed {
			if req.Op != "hello" || req.Token != s.token {
				enc.Encode(response{Err: "bad token: this process is not part of the job"})
				return
			}
			authed = true
			if enc.Encode(response{OK: true}) != nil {
				return
			}
			continue
		}
		resp, ok := s.handle(req)
		if !ok {
			return
		}
		if enc.Encode(resp) != nil {
			return
		}
	}
}

// handle answers one request; ok is false when the server closed while it waited.
func (s *Server) handle(req request) (response, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch req.Op {
	case "set":
		s.values[req.Key] = req.Value
		s.notifyLocked()
		return response{OK: true}, true
	case "add":
		s.counters[req.Key] += req.Delta
		s.notifyLocked()
		return response{OK: true, N: s.counters[req.Key]}, true
	case "get", "wait":
		for {
			if s.closed {
				return response{}, false
			}
			if req.Op == "get" {
				if v, ok := s.values[req.Key]; ok {
					return response{OK: true, Value: v}, true
				}
			} else if n := s.counters[req.Key]; n >= req.N {
				return response{OK: true, N: n}, true
			}
			ch := s.changed
			s.mu.Unlock()
			<-ch
			s.mu.Lock()
		}
	}
	return response{Err: fmt.Sprintf("unknown op %q", req.Op)}, true
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Client is one rank's connection to the store. Calls are serialised.
type Client struct {
	mu   sync.Mutex
	conn net.Conn
	dec  *json.Decoder
	enc  *json.Encoder
	addr string
}

// ErrLost means the store went away: the launcher stopped the job or died.
var ErrLost = errors.New("lost the connection to the rendezvous store (the launcher stopped the job or exited)")

// Dial connects to addr and presents token, retrying until ctx ends: under an external
// launcher the other ranks may start before rank 0 listens.
func Dial(ctx context.Context, addr, token string) (*Client, error) {
	var d net.Dialer
	delay := 10 * time.Millisecond
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c := &Client{conn: conn, dec: json.NewDecoder(bufio.NewReader(conn)), enc: json.NewEncoder(conn), addr: addr}
			resp, err := c.call(ctx, request{Op: "hello", Token: token})
			if err != nil {
				conn.Close()
				return nil, fmt.Errorf("rendezvous store %s: %w", addr, err)
			}
			if !resp.OK {
				conn.Close()
				return nil, fmt.Errorf("rendezvous store %s refused this rank: %s", addr, resp.Err)
			}
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("rendezvous store %s: could not connect: %w (is rank 0 running and the address right?)", addr, err)
		case <-time.After(delay):
		}
		if delay < 500*time.Millisecond {
			delay *= 2
		}
	}
}

// Close drops the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) call(ctx context.Context, req request) (response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var resp response
	if err := c.enc.Encode(req); err != nil {
		return resp, c.wrap(ctx, err)
	}
	if err := c.dec.Decode(&resp); err != nil {
		return resp, c.wrap(ctx, err)
	}
	if resp.Err != "" && req.Op != "hello" {
		return resp, errors.New(resp.Err)
	}
	return resp, nil
}

func (c *Client) wrap(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: %v", ErrLost, err)
}

// Set stores value under key.
func (c *Client) Set(ctx context.Context, key string, value []byte) error {
	_, err := c.call(ctx, request{Op: "set", Key: key, Value: value})
	return err
}

// Get waits until key is set and returns its value.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	resp, err := c.call(ctx, request{Op: "get", Key: key})
	return resp.Value, err
}

// Add adds delta to a counter and returns the new value.
func (c *Client) Add(ctx context.Context, key string, delta int64) (int64, error) {
	resp, err := c.call(ctx, request{Op: "add", Key: key, Delta: delta})
	return resp.N, err
}

// WaitCount waits until counter key reaches n.
func (c *Client) WaitCount(ctx context.Context, key string, n int64) error {
	_, err := c.call(ctx, request{Op: "wait", Key: key, N: n})
	return err
}

// Barrier returns once n callers have entered the barrier called name. Each name is
// used once per job (callers add a sequence number).
func (c *Client) Barrier(ctx context.Context, name string, n int) error {
	if _, err := c.Add(ctx, "barrier/"+name, 1); err != nil {
		return err
	}
	return c.WaitCount(ctx, "barrier/"+name, int64(n))
}
