package engine

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backends"
)

// own is the implementations of the backends cmd/symmem runs.
var own = backend.Builtin(backends.All()...)
