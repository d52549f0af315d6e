package store

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// clientMaxMessage is the largest request a Client sends: the server's default limit,
// so that an oversized result fails with ErrTooLarge rather than a dropped connection.
var clientMaxMessage = DefaultMaxMessage

// Client is one rank's connection to the store. Calls are serialised.
type Client struct {
	mu   sync.Mutex
	conn net.Conn
	dec  *json.Decoder
	addr string
}

// ErrLost means the store went away: the launcher stopped the job or died.
// ErrRefused is the store's answer to a client with the wrong token.
var ErrRefused = errors.New("not a member of this job")

var ErrLost = errors.New("lost the connection to the rendezvous store (the launcher stopped the job or exited)")

// ErrSilent means the store took the connection but did not answer the greeting for
// the Dialer's Silence: the process that hosts it is stopped or frozen.
var ErrSilent = errors.New("the rendezvous store took the connection but does not answer (its process stopped or frozen?)")

// Dial connects to addr and presents token, retrying until ctx ends: under an external
// launcher the other ranks may start before rank 0 listens, and a store busy with more
// unauthenticated connections than it keeps closes new ones before answering.
func Dial(ctx context.Context, addr, token string) (*Client, error) {
	return Dialer{}.Dial(ctx, addr, token)
}

// A Dialer reaches a store. Silence, when positive, is how long a greeting may go
// unanswered once the connection is up before Dial gives up with ErrSilent; it is
// counted only while this process runs (a pause of the whole job, this process
// included, is nobody's silence), as the ranks' heartbeats are.
type Dialer struct {
	Silence time.Duration
}

// Dial is the package's Dial, with d's bound on silence.
func (d Dialer) Dial(ctx context.Context, addr, token string) (*Client, error) {
	var nd net.Dialer
	delay := 10 * time.Millisecond
	start, dropped := time.Now(), 0
	for {
		conn, err := nd.DialContext(ctx, "tcp", addr)
		if err == nil {
			c := &Client{conn: conn, dec: json.NewDecoder(bufio.NewReader(conn)), addr: addr}
			resp, herr := d.hello(ctx, c, token)
			switch {
			case herr == nil && resp.OK:
				return c, nil
			case herr == nil:
				conn.Close()
				return nil, fmt.Errorf("rendezvous store %s refused this rank: %s: %w", addr, resp.Err, ErrRefused)
			case errors.Is(herr, ErrSilent):
				return nil, fmt.Errorf("rendezvous store %s: no answer for %s: %w", addr, d.Silence, herr)
			case ctx.Err() != nil || !errors.Is(herr, ErrLost):
				conn.Close()
				return nil, fmt.Errorf("rendezvous store %s: %w", addr, herr)
			}
			conn.Close() // dropped before it answered: try again
			err = herr
			dropped++
		}
		select {
		case <-ctx.Done():
			if dropped > 0 {
				// Something listens there, and closed every greeting unanswered: a store
				// full of connections that present no token, or no store at all.
				return nil, fmt.Errorf("rendezvous store %s: for %s it took %d connections of this rank and closed each before answering: it is crowded with connections that present no token (another process connecting to its port?) or is not a symmem store: %w",
					addr, time.Since(start).Round(time.Second), dropped, err)
			}
			return nil, fmt.Errorf("rendezvous store %s: could not connect for %s: %w (is rank 0 running and the address right?)", addr, time.Since(start).Round(time.Second), err)
		case <-time.After(delay):
		}
		if delay < 500*time.Millisecond {
			delay *= 2
		}
	}
}

// hello greets the store with token; past d.Silence without an answer (counted while
// this process runs) it drops the connection and returns ErrSilent.
func (d Dialer) hello(ctx context.Context, c *Client, token string) (response, error) {
	req := request{Op: "hello", Token: token}
	if d.Silence <= 0 {
		return c.call(ctx, req)
	}
	type answer struct {
		resp response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := c.call(ctx, req)
		got <- answer{resp, err}
	}()
	const period = 100 * time.Millisecond
	t := time.NewTicker(period)
	defer t.Stop()
	last, quiet := time.Now(), time.Duration(0)
	for {
		select {
		case a := <-got:
			return a.resp, a.err
		case now := <-t.C:
			dt := now.Sub(last)
			last = now
			if dt > d.Silence/2 {
				dt = period // this process did not run in between: the job was paused
			}
			if quiet += dt; quiet > d.Silence {
				c.conn.Close()
				<-got
				return response{}, ErrSilent
			}
		}
	}
}

// Close drops the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) call(ctx context.Context, req request) (response, error) {
	var resp response
	b, err := json.Marshal(req)
	if err != nil {
		return resp, err
	}
	if len(b) > clientMaxMessage {
		return resp, fmt.Errorf("rendezvous store: %s %q: %w (%d bytes, the limit is %d)", req.Op, req.Key, ErrTooLarge, len(b), clientMaxMessage)
	}
	b = append(b, '\n')
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.conn.Write(b); err != nil {
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

// Join says who this connection belongs to (a rank): if it closes before Leave, the
// server counts that member as lost (Server.Lost).
func (c *Client) Join(ctx context.Context, member string) error {
	_, err := c.call(ctx, request{Op: "join", Key: member})
	return err
}

// Leave ends Join: the connection may close from now on without alarm.
func (c *Client) Leave(ctx context.Context) error {
	_, err := c.call(ctx, request{Op: "leave"})
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
