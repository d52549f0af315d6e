package cli

import (
	"github.com/symmem/symmem"
	"github.com/symmem/symmem/pkg/kernels"
)

// backends are the backends the commands run on: those the binary was built with, or
// the CPU backend alone.
func (s IO) backends() []symmem.Backend {
	if s.Backends != nil {
		return s.Backends
	}
	var cpu []symmem.Backend
	for _, b := range symmem.Backends() {
		if b.Name() == symmem.CPU {
			cpu = append(cpu, b)
		}
	}
	return cpu
}

// registry is the implementations of the backends the commands run on: what help
// text, completion and the listings show (a job adds a user's with --kernels).
func (s IO) registry() registry { return symmem.Implementations(s.backends()) }

// registry lists implementations.
type registry []symmem.Implementation

// names lists the implementations' names.
func (r registry) names() []string {
	var out []string
	for _, im := range r {
		out = append(out, im.Name)
	}
	return out
}

// byName finds an implementation.
func (r registry) byName(name string) (symmem.Implementation, bool) {
	for _, im := range r {
		if im.Name == name {
			return im, true
		}
	}
	return symmem.Implementation{}, false
}

// host reads what decides whether a kernel loads here, from the first backend that
// can tell; a binary without one has no GPU to load them on.
func (s IO) host(lib string) kernels.Host {
	for _, b := range s.backends() {
		if h, ok := b.Host(lib); ok {
			return h
		}
	}
	return kernels.Host{NoGPU: "this symmem is built without a GPU backend"}
}
