// Package store is the rendezvous store that joins a job's ranks: a small key-value
// server on TCP that the launcher (or rank 0 under an external launcher) hosts, and the
// client every rank uses to exchange the NVSHMEM unique ID, meet at barriers and report
// results.
//
// The wire format is one JSON object per line. A client must first present the job's
// token; a connection that does not is closed, so a stray process on the same host
// cannot join or read the job. Until it has presented the token a connection is held
// to a short first line and a deadline, and only so many such connections are kept at
// once, so that a hostile neighbour can neither exhaust the launcher's memory nor its
// file descriptors; past that number the one that has waited longest makes room, so
// that neither can it keep a rank out; see Options.
package store

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Defaults for Options.
const (
	// DefaultMaxMessage bounds one line from an authenticated client. The largest
	// legitimate message is a rank's result: JSON, base64-encoded in the request, of
	// at most a few MB even for thousands of bench rows.
	DefaultMaxMessage = 64 << 20
	// DefaultMaxAuthMessage bounds the first line, the token (a hello is ~60 bytes).
	DefaultMaxAuthMessage = 4 << 10
	// DefaultAuthTimeout is how long a new connection has to present the token.
	DefaultAuthTimeout = 5 * time.Second
	// DefaultMaxUnauthenticated is how many connections may wait to present the
	// token at once; the ranks of a job connect well within it.
	DefaultMaxUnauthenticated = 64
)

// Options bound what a connection may cost the server. Zero fields take the defaults.
type Options struct {
	// AuthTimeout closes a connection that has not presented the token in time.
	AuthTimeout time.Duration
	// MaxAuthMessage is the largest first line (the hello), in bytes.
	MaxAuthMessage int
	// MaxMessage is the largest line from an authenticated client, in bytes.
	MaxMessage int
	// MaxUnauthenticated is how many connections may be open before presenting the
	// token; past it, each new one closes the one that has waited longest.
	MaxUnauthenticated int
}

func (o Options) withDefaults() Options {
	if o.AuthTimeout <= 0 {
		o.AuthTimeout = DefaultAuthTimeout
	}
	if o.MaxAuthMessage <= 0 {
		o.MaxAuthMessage = DefaultMaxAuthMessage
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = DefaultMaxMessage
	}
	if o.MaxUnauthenticated <= 0 {
		o.MaxUnauthenticated = DefaultMaxUnauthenticated
	}
	return o
}

// ErrTooLarge means a message is over the store's size limit.
var ErrTooLarge = errors.New("message too large for the rendezvous store")

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
	ln       net.Listener
	tokenSum [sha256.Size]byte // compared in constant time
	opt      Options
	done     chan struct{} // closed by Close

	mu       sync.Mutex
	values   map[string][]byte
	counters map[string]int64
	changed  chan struct{} // closed and replaced on every change
	conns    map[net.Conn]struct{}
	lost     []string // members whose connection closed without leaving
	joined   map[string]bool
	unauth   waiting // connections that have not presented the token yet
	evicted  int64   // of them, closed to make room for newer ones (Crowded)
	closed   bool
	wg       sync.WaitGroup
}

// Listen starts a store on addr ("127.0.0.1:0" picks a free port) with the default
// Options.
func Listen(addr, token string) (*Server, error) {
	return ListenOptions(addr, token, Options{})
}

// ListenOptions is Listen with limits other than the defaults.
func ListenOptions(addr, token string, opt Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rendezvous store: listen on %s: %w", addr, err)
	}
	return Serve(ln, token, opt), nil
}

// Serve starts a store on ln, which it owns from then on: Close closes it.
func Serve(ln net.Listener, token string, opt Options) *Server {
	s := &Server{
		ln: ln, tokenSum: sha256.Sum256([]byte(token)),
		opt:      opt.withDefaults(),
		done:     make(chan struct{}),
		values:   map[string][]byte{},
		counters: map[string]int64{},
		changed:  make(chan struct{}),
		conns:    map[net.Conn]struct{}{},
	}
	s.wg.Add(1)
	go s.accept()
	return s
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

// Close stops the server and drops every client; blocked calls fail. Calling it again
// does nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	close(s.done)
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

// Accept backs off this long after its first error, doubling up to maxAcceptDelay
// (variables for the tests).
var (
	minAcceptDelay = 5 * time.Millisecond
	maxAcceptDelay = time.Second
)

// accept serves until Close. An error from Accept (out of file descriptors after a
// burst of connections, say) does not stop it: like net/http's Server it waits, 5 ms
// doubling to 1 s, and tries again, since the job's ranks still need the store.
func (s *Server) accept() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return // someone closed the listener under us: nothing more will come
			}
			delay = min(max(2*delay, minAcceptDelay), maxAcceptDelay)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-s.done:
				t.Stop()
				return
			}
			continue
		}
		delay = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.admitLocked(c)
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// tokenOK compares in constant time (of hashes, so not even the length shows).
func (s *Server) tokenOK(token string) bool {
	sum := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	authed := false
	member := "" // who this connection says it is (Client.Join), until it leaves
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		if !authed {
			s.unauth.remove(c)
		}
		if member != "" && !s.closed {
			// A member whose connection closes without leaving has died.
			s.lost = append(s.lost, member)
			s.notifyLocked()
		}
		s.mu.Unlock()
		c.Close()
	}()
	// Until the token is in, the peer may be anyone: it gets a deadline for the hello
	// (reply included) and a short line.
	if c.SetDeadline(time.Now().Add(s.opt.AuthTimeout)) != nil {
		return
	}
	r := bufio.NewReader(c)
	enc := json.NewEncoder(c)
	for {
		limit := s.opt.MaxMessage
		if !authed {
			limit = s.opt.MaxAuthMessage
		}
		req, err := readRequest(r, limit)
		if err != nil {
			return
		}
		if !authed {
			if req.Op != "hello" || !s.tokenOK(req.Token) {
				enc.Encode(response{Err: "bad token: this process is not part of the job"})
				return
			}
			// Out of the waiting list before the answer: evicted once its client holds
			// the answer, it would be a member's connection dropped.
			s.mu.Lock()
			waited := s.unauth.remove(c)
			authed = true
			s.mu.Unlock()
			if !waited || enc.Encode(response{OK: true}) != nil || c.SetDeadline(time.Time{}) != nil {
				return // evicted while its hello was read: the client dials again
			}
			continue
		}
		switch req.Op {
		case "join":
			member = req.Key
			s.mu.Lock()
			if s.joined == nil {
				s.joined = map[string]bool{}
			}
			s.joined[member] = true
			s.mu.Unlock()
		case "leave":
			member = ""
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
	case "join", "leave":
		return response{OK: true}, true
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

// Set and Add change the store from the process that hosts it, as a client would.
func (s *Server) Set(key string, value []byte) {
	s.handle(request{Op: "set", Key: key, Value: value})
}

// Add adds delta to the counter key.
func (s *Server) Add(key string, delta int64) {
	s.handle(request{Op: "add", Key: key, Delta: delta})
}

// Joined says whether member ever joined (Client.Join).
func (s *Server) Joined(member string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.joined[member]
}

// Lost lists the members (Client.Join) whose connection closed without leaving: ranks
// that died.
func (s *Server) Lost() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lost...)
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// readRequest reads and decodes one request: a line of at most limit bytes (the
// newline not counted). It buffers no more than that however long the line, fails with
// ErrTooLarge past it, skips blank lines and fails on anything that is not one JSON
// request object.
func readRequest(r *bufio.Reader, limit int) (request, error) {
	for {
		line, err := readLine(r, limit)
		if err != nil {
			return request{}, err
		}
		if len(bytes.Trim(line, " \t\r")) == 0 {
			continue // JSON whitespace only
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			return request{}, err
		}
		return req, nil
	}
}

// readLine returns the next line without its newline; the slice may point into r's
// buffer, so it is good until the next read.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		n := len(chunk)
		if err == nil {
			n-- // the newline
		}
		if len(line)+n > limit {
			return nil, ErrTooLarge
		}
		if err == nil && line == nil {
			return chunk[:n], nil // the common case: the whole line is in the buffer
		}
		if need := len(line) + len(chunk); need > cap(line) {
			grown := make([]byte, len(line), min(max(2*cap(line), need), limit+1))
			copy(grown, line)
			line = grown
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(line) > 0:
			return nil, io.ErrUnexpectedEOF // the line was cut off
		default:
			return nil, err
		}
	}
}
