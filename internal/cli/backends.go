package cli

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/cpu"
	"github.com/symmem/symmem/pkg/kernels"
)

// backends are the backends the commands run on: those the binary was built with, or
// the CPU backend alone.
func (s IO) backends() []backend.Factory {
	if s.Backends != nil {
		return s.Backends
	}
	return []backend.Factory{cpu.Factory{}}
}

// registry is the implementations of the backends the commands run on: what help
// text, completion and the listings show (a job adds a user's with --kernels).
func (s IO) registry() *backend.Registry { return backend.Builtin(s.backends()...) }

// hoster is a backend that can say whether kernels load on this machine (the GPU one).
type hoster interface {
	Host(lib string) kernels.Host
}

// host reads what decides whether a kernel loads here, from the first backend that
// can tell; a binary without one has no GPU to load them on.
func (s IO) host(lib string) kernels.Host {
	for _, f := range s.backends() {
		if h, ok := f.(hoster); ok {
			return h.Host(lib)
		}
	}
	return kernels.Host{NoGPU: "this symmem is built without a GPU backend"}
}
