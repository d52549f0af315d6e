package coll

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// SumTypes are the element types sums are defined for, by their canonical names.
var SumTypes = []string{"bf16", "float16", "float32", "float64", "int32", "int64"}

// ElemSize is the size of a SumTypes element (0 for another name).
func ElemSize(dtype string) int64 {
	switch canonical(dtype) {
	case "bf16", "float16":
		return 2
	case "float32", "int32":
		return 4
	case "float64", "int64":
		return 8
	}
	return 0
}

// Canonical is dtype's name as symmem spells it (bf16, float16, float32, ...): torch's
// names (bfloat16, half, float, double) are taken too.
func Canonical(dtype string) string { return canonical(dtype) }

func canonical(dtype string) string {
	switch d := strings.ToLower(dtype); d {
	case "bfloat16":
		return "bf16"
	case "half", "fp16":
		return "float16"
	case "float", "fp32":
		return "float32"
	case "double":
		return "float64"
	default:
		return d
	}
}

// Sum writes the element-wise sum of srcs into dst (all the same length; dst may be
// one of them). Floating-point sums add in float32 (float64 for float64) in the order
// given and round once, as a kernel that loads, adds and stores does.
func Sum(dtype string, dst []byte, srcs ...[]byte) error {
	for _, s := range srcs {
		if len(s) != len(dst) {
			return fmt.Errorf("sum of %s: %d-byte input for a %d-byte output", dtype, len(s), len(dst))
		}
	}
	le := binary.LittleEndian
	switch canonical(dtype) {
	case "bf16", "float16":
		bf := canonical(dtype) == "bf16"
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
						a[j] += FromF16(le.Uint16(in[2*j:]))
					}
				}
			}
			out := dst[lo:hi]
			for j, v := range a {
				if bf {
					le.PutUint16(out[2*j:], BF16(v))
				} else {
					le.PutUint16(out[2*j:], F16(v))
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
		return fmt.Errorf("no sum for element type %q: use one of %s", dtype, strings.Join(SumTypes, ", "))
	}
	return nil
}

// Encode writes the integer v as one element of dtype into b.
func Encode(dtype string, b []byte, v int64) {
	le := binary.LittleEndian
	switch canonical(dtype) {
	case "bf16":
		le.PutUint16(b, BF16(float32(v)))
	case "float16":
		le.PutUint16(b, F16(float32(v)))
	case "float32":
		le.PutUint32(b, math.Float32bits(float32(v)))
	case "float64":
		le.PutUint64(b, math.Float64bits(float64(v)))
	case "int32":
		le.PutUint32(b, uint32(int32(v)))
	case "int64":
		le.PutUint64(b, uint64(v))
	}
}

// BF16 rounds a float32 to bfloat16, to nearest even.
func BF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// FromBF16 widens a bfloat16 to float32 (exactly).
func FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F16 converts a float32 to IEEE half precision, to nearest even (subnormals too).
func F16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int32(u>>23&0xff) - 127 + 15
	mant := u & 0x7fffff
	switch {
	case exp >= 31:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		if mant&(half<<1-1) > half || (mant&(half<<1-1) == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++
	}
	return sign | uint16(r)
}

// FromF16 widens a half to float32 (exactly).
func FromF16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		for mant&0x400 == 0 {
			mant <<= 1
			exp--
		}
		exp++
		mant &= 0x3ff
	case exp == 31:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}
