package launch

import (
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/symmem/symmem/pkg/launch/store"
)

// A store that cannot listen says which setting gave the address and what to do, not
// Go's 'listen tcp: ...'.
func TestListenError(t *testing.T) {
	listen := func(addr string) error {
		srv, err := store.Listen(addr, "t")
		if err == nil {
			srv.Close()
			t.Fatalf("listened on %s", addr)
		}
		return &ListenError{Setting: "--store-addr", Addr: addr, Err: err, FreeDefault: true}
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dns := &net.OpError{Op: "listen", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "nosuchhost", IsNotFound: true}}
	for _, c := range []struct {
		err  error
		want string
	}{
		{listen(held.Addr().String()), `--store-addr "` + held.Addr().String() + `": the port is taken (another job?): give this job its own with --store-addr HOST:PORT, or leave it out for a free one`},
		{listen("192.0.2.1:0"), `--store-addr "192.0.2.1:0": 192.0.2.1 is not an address of this host; give one of its own, such as 127.0.0.1`},
		// A caller that names no setting of its own gets the remedy in plain words.
		{&ListenError{Addr: "127.0.0.1:80", Err: &net.OpError{Op: "listen", Net: "tcp", Err: syscall.EADDRINUSE}},
			`store address "127.0.0.1:80": the port is taken (another job?): give this job its own store address HOST:PORT`},
		{&ListenError{Setting: "--store-addr", Addr: "nosuchhost:5000", Err: dns}, `--store-addr "nosuchhost:5000": no host named nosuchhost is known here; give this host's name or one of its addresses, such as 127.0.0.1`},
		{&ListenError{From: `torchrun environment: MASTER_ADDR="nosuchhost", MASTER_PORT="5000"`, Addr: "nosuchhost:5001", Err: dns},
			`torchrun environment: MASTER_ADDR="nosuchhost", MASTER_PORT="5000" (store at nosuchhost:5001): no host named nosuchhost is known here`},
	} {
		if got := c.err.Error(); !strings.HasPrefix(got, c.want) || strings.Contains(got, "listen tcp") {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}
