package coll

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/symmem/symmem/internal/ops"
)

// Sum writes the element-wise sum of srcs into dst (all the same length; dst may be
// one of them). Floating-point sums add in float32 (float64 for float64) in the order
// given and round once, as a kernel that loads, adds and stores does. One switch over
// the types keeps each inner loop tight (past 80 lines).
func Sum(dtype string, dst []byte, srcs ...[]byte) error {
	for _, s := range srcs {
		if len(s) != len(dst) {
			return fmt.Errorf("sum of %s: %d-byte input for a %d-byte output", dtype, len(s), len(dst))
		}
	}
	le := binary.LittleEndian
	switch ops.Canonical(dtype) {
	case "bf16", "float16":
		bf := ops.Canonical(dtype) == "bf16"
		// Accumulate a chunk at a time, one input after another (in rank order), so the
		// inner loops are tight.
		var acc [1024]float32
		for lo := 0; lo < len(dst); lo += 2 * len(acc) {
			hi := min(lo+2*len(acc), len(dst))
			a := acc[:(hi-lo)/2]
			clear(a)
			for _, s := range srcs {
				in := s[lo:hi]
				if bf {
					for j := range a {
						a[j] += math.Float32frombits(uint32(le.Uint16(in[2*j:])) << 16)
					}
				} else {
					for j := range a {
						a[j] += ops.FromF16(le.Uint16(in[2*j:]))
					}
				}
			}
			out := dst[lo:hi]
			for j, v := range a {
				if bf {
					le.PutUint16(out[2*j:], ops.BF16(v))
				} else {
					le.PutUint16(out[2*j:], ops.F16(v))
				}
			}
		}
	case "float32":
		var acc [1024]float32
		for lo := 0; lo < len(dst); lo += 4 * len(acc) {
			hi := min(lo+4*len(acc), len(dst))
			a := acc[:(hi-lo)/4]
			clear(a)
			for _, s := range srcs {
				in := s[lo:hi]
				for j := range a {
					a[j] += math.Float32frombits(le.Uint32(in[4*j:]))
				}
			}
			out := dst[lo:hi]
			for j, v := range a {
				le.PutUint32(out[4*j:], math.Float32bits(v))
			}
		}
	case "float64":
		for i := 0; i+8 <= len(dst); i += 8 {
			var acc float64
			for _, s := range srcs {
				acc += math.Float64frombits(le.Uint64(s[i:]))
			}
			le.PutUint64(dst[i:], math.Float64bits(acc))
		}
	case "int32":
		for i := 0; i+4 <= len(dst); i += 4 {
			var acc int32
			for _, s := range srcs {
				acc += int32(le.Uint32(s[i:]))
			}
			le.PutUint32(dst[i:], uint32(acc))
		}
	case "int64":
		for i := 0; i+8 <= len(dst); i += 8 {
			var acc int64
			for _, s := range srcs {
				acc += int64(le.Uint64(s[i:]))
			}
			le.PutUint64(dst[i:], uint64(acc))
		}
	default:
		return fmt.Errorf("no sum for element type %q: use one of %s", dtype, strings.Join(ops.SumTypes, ", "))
	}
	return nil
}
