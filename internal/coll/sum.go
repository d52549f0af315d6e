package coll

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/symmem/symmem/internal/ops"
)

// chunkElems is how many elements Reduce combines at a time: its accumulators stay in
// the cache while every input is folded in.
const chunkElems = 1024

// Reduce writes the element-wise reduction of srcs under op into dst (all the same
// length; dst may be one of them). Floating-point values combine in float32 (float64
// for float64), integers in int64, in the order given, and round once at the end, as
// a kernel that loads, combines and stores does; avg divides the combined value by
// the number of inputs there.
func Reduce(op ops.RedOp, dtype string, dst []byte, srcs ...[]byte) error {
	for _, s := range srcs {
		if len(s) != len(dst) {
			return fmt.Errorf("%s of %s: %d-byte input for a %d-byte output", op, dtype, len(s), len(dst))
		}
	}
	d, err := ops.LookupDType(dtype)
	if err != nil || !d.Reducible() {
		return fmt.Errorf("no %s for element type %q: use one of %s", op, dtype, strings.Join(ops.ReduceTypes, ", "))
	}
	if len(srcs) == 0 {
		return fmt.Errorf("%s of %s: no inputs", op, dtype)
	}
	size := int(d.Size)
	n := len(dst) / size
	switch canon := ops.Canonical(dtype); {
	case canon == "float64":
		reduceChunks(n, size, dst, srcs, op.FoldF64, decodeF64, encodeF64, func(v []float64) { meanF(v, len(srcs)) }, op.Mean())
	case d.IsFloat():
		dec, enc := floatCodec(canon)
		reduceChunks(n, size, dst, srcs, op.FoldF32, dec, enc, func(v []float32) { meanF(v, len(srcs)) }, op.Mean())
	default:
		reduceChunks(n, size, dst, srcs, op.FoldI64, decodeInt(size), encodeInt(size), func(v []int64) { meanI(v, len(srcs)) }, op.Mean())
	}
	return nil
}

// reduceChunks folds srcs into dst a chunk of elements at a time: the first input
// decoded into the accumulators, every other one decoded beside them and folded in.
func reduceChunks[T float32 | float64 | int64](n, size int, dst []byte, srcs [][]byte, fold func(acc, x []T),
	decode func(out []T, in []byte), encode func(out []byte, in []T), mean func([]T), avg bool) {
	var accBuf, xBuf [chunkElems]T
	for lo := 0; lo < n; lo += chunkElems {
		hi := min(lo+chunkElems, n)
		acc, x := accBuf[:hi-lo], xBuf[:hi-lo]
		decode(acc, srcs[0][lo*size:hi*size])
		for _, s := range srcs[1:] {
			decode(x, s[lo*size:hi*size])
			fold(acc, x)
		}
		if avg {
			mean(acc)
		}
		encode(dst[lo*size:hi*size], acc)
	}
}

func meanF[T float32 | float64](v []T, n int) {
	for i := range v {
		v[i] /= T(n)
	}
}

func meanI(v []int64, n int) {
	for i := range v {
		v[i] /= int64(n)
	}
}

var le = binary.LittleEndian

// floatCodec decodes and encodes a 2- or 4-byte float type through float32.
func floatCodec(canon string) (func([]float32, []byte), func([]byte, []float32)) {
	switch canon {
	case "bf16":
		return func(out []float32, in []byte) {
				for j := range out {
					out[j] = math.Float32frombits(uint32(le.Uint16(in[2*j:])) << 16)
				}
			}, func(out []byte, in []float32) {
				for j, v := range in {
					le.PutUint16(out[2*j:], ops.BF16(v))
				}
			}
	case "float16":
		return func(out []float32, in []byte) {
				for j := range out {
					out[j] = ops.FromF16(le.Uint16(in[2*j:]))
				}
			}, func(out []byte, in []float32) {
				for j, v := range in {
					le.PutUint16(out[2*j:], ops.F16(v))
				}
			}
	}
	return func(out []float32, in []byte) {
			for j := range out {
				out[j] = math.Float32frombits(le.Uint32(in[4*j:]))
			}
		}, func(out []byte, in []float32) {
			for j, v := range in {
				le.PutUint32(out[4*j:], math.Float32bits(v))
			}
		}
}

func decodeF64(out []float64, in []byte) {
	for j := range out {
		out[j] = math.Float64frombits(le.Uint64(in[8*j:]))
	}
}

func encodeF64(out []byte, in []float64) {
	for j, v := range in {
		le.PutUint64(out[8*j:], math.Float64bits(v))
	}
}

func decodeInt(size int) func([]int64, []byte) {
	if size == 4 {
		return func(out []int64, in []byte) {
			for j := range out {
				out[j] = int64(int32(le.Uint32(in[4*j:])))
			}
		}
	}
	return func(out []int64, in []byte) {
		for j := range out {
			out[j] = int64(le.Uint64(in[8*j:]))
		}
	}
}

func encodeInt(size int) func([]byte, []int64) {
	if size == 4 {
		return func(out []byte, in []int64) {
			for j, v := range in {
				le.PutUint32(out[4*j:], uint32(v))
			}
		}
	}
	return func(out []byte, in []int64) {
		for j, v := range in {
			le.PutUint64(out[8*j:], uint64(v))
		}
	}
}
