package launch

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// ListenError is a store that could not listen where it was told to: the address is
// the caller's to change, and the error says what gave it and what to do.
type ListenError struct {
	// From names what gave the address: "" for the caller's own (Config.StoreAddr),
	// or the launcher's variables (RankInfo.AddrFrom).
	From string
	Addr string
	Err  error
	// FreeDefault: left out, the address would have been a free port (Run's own
	// store), not a fixed one every rank agrees on (an external launcher's).
	FreeDefault bool
	// Setting is the caller's name for the setting that takes another address, for the
	// remedy ("--store-addr" in symmem's CLI); "" words it as "a store address".
	Setting string
}

func (e *ListenError) Error() string {
	host, port, _ := net.SplitHostPort(e.Addr)
	if host == "" {
		host = "every interface"
	}
	with := " store address HOST:PORT"
	if e.Setting != "" {
		with = " with " + e.Setting + " HOST:PORT"
	}
	var dns *net.DNSError
	var why string
	switch {
	case errors.Is(e.Err, syscall.EADDRINUSE):
		why = "the port is taken (another job?): give this job its own" + with
		if e.FreeDefault {
			why += ", or leave it out for a free one"
		}
	case errors.As(e.Err, &dns):
		why = fmt.Sprintf("no host named %s is known here; give this host's name or one of its addresses, such as 127.0.0.1", host)
	case errors.Is(e.Err, syscall.EADDRNOTAVAIL):
		why = fmt.Sprintf("%s is not an address of this host; give one of its own, such as 127.0.0.1", host)
	case errors.Is(e.Err, syscall.EACCES):
		why = fmt.Sprintf("port %s is reserved for root; give one above 1023", port)
	default:
		cause := e.Err
		var se *os.SyscallError
		if errors.As(e.Err, &se) {
			cause = se.Err
		}
		why = fmt.Sprintf("the store cannot listen there (%v); give another%s", cause, with)
	}
	switch {
	case e.From == "" && e.Setting == "":
		return fmt.Sprintf("store address %q: %s", e.Addr, why)
	case e.From == "" || e.From == e.Setting:
		return fmt.Sprintf("%s %q: %s", e.Setting, e.Addr, why)
	}
	return fmt.Sprintf("%s (store at %s): %s", e.From, e.Addr, why)
}

func (e *ListenError) Unwrap() error { return e.Err }
