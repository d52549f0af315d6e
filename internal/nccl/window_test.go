package nccl

import (
	"errors"
	"strings"
	"testing"
)

// A window is registered symmetrically over memory from ncclMemAlloc, collectives on it
// pass, and once it is deregistered the same collective is refused by the fake, which
// tracks which ncclMemAlloc bytes are under a live window.
func TestWindowLifecycle(t *testing.T) {
	f := openFake(t)
	if err := f.Symmetric(); err != nil {
		t.Fatalf("Symmetric() on a 2.27 with every window call: %v", err)
	}
	c, err := f.InitRank(1, UniqueID{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	const size = 4096
	buf, err := f.MemAlloc(size)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.RegisterWindow(buf, size)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AllReduce(buf, buf+size/2, size/2/4, Float32, Sum, 0); err != nil {
		t.Fatalf("all-reduce inside the window: %v", err)
	}
	// Past the window's end by one element.
	if err := c.AllReduce(buf, buf+size/2+4, size/2/4, Float32, Sum, 0); !errors.Is(err, InvalidUsage) {
		t.Errorf("all-reduce running 4 bytes past the window: err = %v, want ncclInvalidUsage", err)
	}
	if err := w.Deregister(); err != nil {
		t.Fatal(err)
	}
	err = c.AllReduce(buf, buf+size/2, size/2/4, Float32, Sum, 0)
	if !errors.Is(err, InvalidUsage) || !strings.Contains(err.Error(), "not under a registered window") {
		t.Errorf("all-reduce after deregistration: err = %v, want the fake's refusal", err)
	}
	if err := w.Deregister(); err == nil || !strings.Contains(err.Error(), "deregistered") {
		t.Errorf("second Deregister: err = %v, want 'deregistered'", err)
	}
	if err := f.MemFree(buf); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ncclCommInitRank", "ncclMemAlloc(size=4096)", "ncclCommWindowRegister(comm=0/1, size=4096, flags=1)",
		"ncclAllReduce", "ncclAllReduce", "ncclCommWindowDeregister(comm=0/1, live)", "ncclAllReduce", "ncclMemFree(ok)",
	}
	got := f.calls()
	if len(got) != len(want) {
		t.Fatalf("calls = %q, want %d calls like %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("call %d = %q, want %q", i, got[i], want[i])
		}
	}
}

// A window larger than its allocation, or over memory NCCL did not allocate, is refused
// with NCCL's word for it, and the error says which rank and how many bytes.
func TestWindowRefusals(t *testing.T) {
	f := openFake(t)
	c, err := f.InitRank(2, UniqueID{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	buf, err := f.MemAlloc(1024)
	if err != nil {
		t.Fatal(err)
	}
	defer f.MemFree(buf)
	_, err = c.RegisterWindow(buf, 2048)
	if !errors.Is(err, InvalidArgument) || !strings.Contains(err.Error(), "rank 1 registering 2048 bytes") {
		t.Errorf("window over 2048 bytes of a 1024-byte allocation: err = %v", err)
	}
	if _, err := c.RegisterWindow(0, 1024); err == nil {
		t.Error("a window at address 0 was registered")
	}
	if _, err := f.MemAlloc(0); err == nil {
		t.Error("MemAlloc(0) succeeded")
	}
}

// A library older than 2.27, or one without the window calls, is refused before any
// call, naming the release needed, the one found and the missing symbol.
func TestSymmetricUnsupported(t *testing.T) {
	if noFake != "" {
		t.Skip(noFake)
	}
	l, err := Open(fakes["nowin"])
	if err != nil {
		t.Fatal(err)
	}
	err = l.Symmetric()
	var u *UnsupportedError
	if !errors.As(err, &u) {
		t.Fatalf("Symmetric() = %v, want an *UnsupportedError", err)
	}
	msg := err.Error()
	for _, s := range []string{"NCCL 2.26.0", "needs NCCL 2.27 or newer", "ncclMemAlloc"} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not say %q", msg, s)
		}
	}
	if _, err := l.MemAlloc(64); !errors.As(err, &u) {
		t.Errorf("MemAlloc on a library without windows: err = %v, want the same refusal", err)
	}
	// The symbols alone do not make a 2.26 symmetric.
	old, err := Open(fakes["old"])
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Symmetric(); !errors.As(err, &u) || u.Missing != "" {
		t.Errorf("Symmetric() on a 2.26 with the window symbols = %v, want a refusal by version", err)
	}
}
