package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"
)

var fuzzSeeds = []string{
	`{"op":"hello","token":"tok"}` + "\n",
	`{"op":"hello","token":"tok"}` + "\n" + `{"op":"set","key":"k","value":"aGVsbG8="}` + "\n" + `{"op":"get","key":"k"}` + "\n",
	`{"op":"hello","token":"tok"}` + "\n" + `{"op":"add","key":"c","delta":-9223372036854775808}` + "\n" + `{"op":"wait","key":"c","n":1}` + "\n",
	`{"op":"hello","token":"tok"}` + "\r\n\r\n  \n" + `{"op":"nope"}` + "\n",
	`{"op":"hello","token":"tok"}` + "\n" + `{"op":"get","key":"never"}` + "\n",
	`{"op":"hello","token":"wrong"}` + "\n",
	`{"op":"hello","token":"` + string(bytes.Repeat([]byte("a"), 200)),
	`{"op":"hello","token":"tok"}{"op":"set"}` + "\n",
	`{"op":"set","value":"!!!notbase64"}` + "\n",
	`{"op":1,"token":["tok"],"delta":1e999}` + "\n",
	`[` + "\n" + `null` + "\n" + `"x"` + "\n" + `{` + "\n",
	"\x00\xff\xfe{\"op\":\"\xc0\"}\n",
	`{"op":"hello","token":"tok","op":"set"}` + "\n",
	"\n\n\n",
	"",
}

// FuzzReadRequest checks the request decoder against a plain reading of the input:
// lines over the limit are refused without being buffered, blank lines skipped, and
// every other line decodes exactly as json.Unmarshal would; it never loops or panics.
func FuzzReadRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), 64)
	}
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		limit = 1 + (limit&0x7fffffff)%256
		r := bufio.NewReaderSize(bytes.NewReader(data), 16) // lines span buffers
		rest := data
		for i := 0; ; i++ {
			if i > len(data)+1 {
				t.Fatal("the decoder does not make progress")
			}
			got, err := readRequest(r, limit)
			want, tail, wantErr := expectRequest(rest, limit)
			rest = tail
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("readRequest(limit %d) = %+v, %v; want %+v, %v", limit, got, err, want, wantErr)
			}
			if err != nil {
				if errors.Is(wantErr, ErrTooLarge) || errors.Is(wantErr, io.EOF) || errors.Is(wantErr, io.ErrUnexpectedEOF) {
					if !errors.Is(err, wantErr) {
						t.Fatalf("readRequest = %v, want %v", err, wantErr)
					}
				}
				return // the server closes the connection at the first error
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("readRequest = %+v, want %+v", got, want)
			}
		}
	})
}

// expectRequest is what readRequest should make of data: the request, or the error, and
// what is left after it.
func expectRequest(data []byte, limit int) (request, []byte, error) {
	for {
		if len(data) == 0 {
			return request{}, nil, io.EOF
		}
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(data) > limit {
				return request{}, nil, ErrTooLarge
			}
			return request{}, nil, io.ErrUnexpectedEOF
		}
		line := data[:i]
		data = data[i+1:]
		if len(line) > limit {
			return request{}, nil, ErrTooLarge
		}
		if len(bytes.Trim(line, " \t\r")) == 0 {
			continue
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			return request{}, nil, err
		}
		return req, data, nil
	}
}

// pipeListener hands the server in-memory connections.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// FuzzServerSession feeds a whole connection's input to a server: whatever it is, the
// server neither panics nor hangs, and Close returns.
func FuzzServerSession(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ln := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
		s := Serve(ln, "tok", Options{MaxAuthMessage: 64, MaxMessage: 1024, AuthTimeout: time.Second})
		cli, srv := net.Pipe()
		ln.conns <- srv
		go io.Copy(io.Discard, cli)
		wrote := make(chan struct{})
		go func() {
			cli.Write(data) // fails if the server hangs up first
			cli.Close()
			close(wrote)
		}()
		select {
		case <-wrote:
		case <-time.After(50 * time.Millisecond): // a get or wait that nothing will answer
		}
		closed := make(chan struct{})
		go func() { s.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("the server did not close")
		}
		cli.Close()
		<-wrote
	})
}
