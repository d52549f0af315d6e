package ops

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// DType is an element type of the test buffers.
type DType struct {
	Name string
	Size int64
	// encode writes v into b (len Size); it fails when v does not fit the type.
	encode func(b []byte, v float64) error
	decode func(b []byte) float64
	float  bool
	// reducible says the reduction operators are defined for it (ReduceTypes).
	reducible bool
}

func intType(name string, size int64, lo, hi float64, signed bool) DType {
	return DType{Name: name, Size: size,
		encode: func(b []byte, v float64) error {
			if v != math.Trunc(v) || v < lo || v > hi {
				// 'f': %g wrote int32's bounds as -2.147483648e+09..2.147483647e+09.
				return fmt.Errorf("value %g does not fit %s (integers %s..%s)", v, name,
					strconv.FormatFloat(lo, 'f', -1, 64), strconv.FormatFloat(hi, 'f', -1, 64))
			}
			putInt(b, int64(v))
			return nil
		},
		decode: func(b []byte) float64 { return float64(getInt(b, signed)) },
	}
}

func putInt(b []byte, v int64) {
	switch len(b) {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	case 8:
		binary.LittleEndian.PutUint64(b, uint64(v))
	}
}

func getInt(b []byte, signed bool) int64 {
	switch len(b) {
	case 1:
		if signed {
			return int64(int8(b[0]))
		}
		return int64(b[0])
	case 2:
		if signed {
			return int64(int16(binary.LittleEndian.Uint16(b)))
		}
		return int64(binary.LittleEndian.Uint16(b))
	case 4:
		if signed {
			return int64(int32(binary.LittleEndian.Uint32(b)))
		}
		return int64(binary.LittleEndian.Uint32(b))
	}
	return int64(binary.LittleEndian.Uint64(b))
}

func floatType(name string, size int64, max float64, to func(float64) uint64, from func(uint64) float64) DType {
	return DType{Name: name, Size: size, float: true,
		encode: func(b []byte, v float64) error {
			if math.IsNaN(v) || math.Abs(v) > max {
				return fmt.Errorf("value %g does not fit %s (|v| <= %g)", v, name, max)
			}
			putInt(b, int64(to(v)))
			return nil
		},
		decode: func(b []byte) float64 { return from(uint64(getInt(b, false))) },
	}
}

// dtypes is the one table of element types; reducible marks those ReduceTypes lists.
var dtypes = map[string]DType{
	"int8":    intType("int8", 1, math.MinInt8, math.MaxInt8, true),
	"uint8":   intType("uint8", 1, 0, math.MaxUint8, false),
	"int16":   intType("int16", 2, math.MinInt16, math.MaxInt16, true),
	"int32":   intType("int32", 4, math.MinInt32, math.MaxInt32, true),
	"int64":   intType("int64", 8, -(1 << 53), 1<<53, true),
	"float16": floatType("float16", 2, 65504, func(v float64) uint64 { return uint64(F16(float32(v))) }, func(u uint64) float64 { return float64(FromF16(uint16(u))) }),
	"bf16":    floatType("bf16", 2, 3.38e38, func(v float64) uint64 { return uint64(BF16(float32(v))) }, func(u uint64) float64 { return float64(math.Float32frombits(uint32(u) << 16)) }),
	"float32": floatType("float32", 4, math.MaxFloat32, func(v float64) uint64 { return uint64(math.Float32bits(float32(v))) }, func(u uint64) float64 { return float64(math.Float32frombits(uint32(u))) }),
	"float64": floatType("float64", 8, math.MaxFloat64, math.Float64bits, math.Float64frombits),
}

// aliases users type out of habit (torch names), by the canonical name each stands for.
var dtypeAliases = map[string]string{"bfloat16": "bf16", "half": "float16", "fp16": "float16", "float": "float32", "fp32": "float32", "double": "float64", "int": "int32", "char": "int8"}

func init() {
	for _, n := range ReduceTypes {
		d := dtypes[n]
		d.reducible = true
		dtypes[n] = d
	}
}

// ReduceTypes are the element types the reduction operators (RedOps) are defined for,
// by their canonical names.
var ReduceTypes = []string{"bf16", "float16", "float32", "float64", "int32", "int64"}

// Canonical is dtype's name as symmem spells it (bf16, float16, float32, ...): torch's
// names (bfloat16, half, float, double) are taken too. A name of no type comes back
// lower-cased.
func Canonical(dtype string) string {
	n := strings.ToLower(dtype)
	if a, ok := dtypeAliases[n]; ok {
		return a
	}
	return n
}

// ElemSize is the size of a ReduceTypes element (0 for another name).
func ElemSize(dtype string) int64 {
	if d, ok := dtypes[Canonical(dtype)]; ok && d.reducible {
		return d.Size
	}
	return 0
}

// Reducible says whether the reduction operators are defined for d.
func (d DType) Reducible() bool { return d.reducible }

// IsFloat says whether d is a floating-point type.
func (d DType) IsFloat() bool { return d.float }

// LookupDType returns the named type or an error that lists the known ones.
func LookupDType(name string) (DType, error) {
	if d, ok := dtypes[Canonical(name)]; ok {
		return d, nil
	}
	return DType{}, fmt.Errorf("unknown dtype %q: use one of %s", name, strings.Join(DTypeNames(), ", "))
}

// DTypeNames lists the supported types, sorted.
func DTypeNames() []string {
	var names []string
	for n := range dtypes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Format prints one element the way the received line shows it.
func (d DType) Format(b []byte) string {
	v := d.decode(b)
	if d.float {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strconv.FormatInt(int64(v), 10)
}

// Encode returns v as one element of d.
func (d DType) Encode(v float64) ([]byte, error) {
	b := make([]byte, d.Size)
	return b, d.encode(b, v)
}

// Value is the value the first element of b holds, as an element of d.
func (d DType) Value(b []byte) float64 { return d.decode(b[:d.Size]) }

// Round is v as one element of d holds it (rounded to the type's precision).
func (d DType) Round(v float64) float64 {
	b := make([]byte, d.Size)
	_ = d.encode(b, v)
	return d.decode(b)
}

// Elements is vs as elements of d, one after another; a value that does not fit is
// written as the encoding leaves it (the callers' values are checked to fit).
func (d DType) Elements(vs []float64) []byte {
	out := make([]byte, int64(len(vs))*d.Size)
	for i, v := range vs {
		_ = d.encode(out[int64(i)*d.Size:int64(i+1)*d.Size], v)
	}
	return out
}

// PutInt writes the integer v as one element of d into b (len Size): the check
// tables are small integers, exact in every type, so it cannot fail for them.
func (d DType) PutInt(b []byte, v int64) { _ = d.encode(b, float64(v)) }
