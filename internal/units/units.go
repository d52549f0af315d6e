// Package units parses and prints byte sizes the way users type them: 4, 4K, 256M,
// 1G, 1GiB (all binary multiples).
package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/symmem/symmem/internal/setting"
)

// Size is a byte count that implements pflag.Value.
type Size int64

// MaxSize is the largest size accepted: room to add and multiply without overflow.
const MaxSize = int64(1) << 50

var suffixes = []struct {
	s string
	m int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"tb", 1 << 40},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}, {"b", 1},
}

var (
	errSizeSyntax = errors.New("want a number of bytes with an optional K, M, G or T suffix, such as 256M")
	errNegative   = errors.New("must not be negative")
)

// parse reads a decimal number with an optional binary suffix and returns its value
// (maybe fractional or huge: the caller judges). Its errors do not repeat the text: pflag
// and the config layer put the flag and the value in front.
func parse(s string, syntax error) (float64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if strings.HasPrefix(t, "-") {
		return 0, errNegative
	}
	mult := int64(1)
	for _, suf := range suffixes {
		if strings.HasSuffix(t, suf.s) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, suf.s)), suf.m
			break
		}
	}
	// Digits with an optional fraction only: ParseFloat alone would also take "inf",
	// "nan", "1e3" and "0x1p4".
	whole, frac, dot := strings.Cut(t, ".")
	if whole == "" && frac == "" || !digits(whole) || !digits(frac) || dot && frac == "" {
		return 0, syntax
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) { // too many digits: +Inf, out of range
		return 0, syntax
	}
	return n * float64(mult), nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ParseSize reads "256M", "4K", "1GiB" or a plain number of bytes.
func ParseSize(s string) (int64, error) {
	n, err := size(s)
	if err != nil {
		return 0, fmt.Errorf("size %q: %v", s, err)
	}
	return n, nil
}

func size(s string) (int64, error) {
	v, err := parse(s, errSizeSyntax)
	switch {
	case err != nil:
		return 0, err
	case v > float64(MaxSize):
		return 0, fmt.Errorf("out of range: give 0..%s", FormatSize(MaxSize))
	case v != float64(int64(v)):
		return 0, fmt.Errorf("%s is not a whole number of bytes", strconv.FormatFloat(v, 'f', -1, 64))
	}
	return int64(v), nil
}

// FormatSize prints n compactly: 4B, 64K, 256M, 1G, or 1.5M when not a round multiple.
func FormatSize(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.m {
			if n%u.m == 0 {
				return strconv.FormatInt(n/u.m, 10) + u.s
			}
			return strconv.FormatFloat(float64(n)/float64(u.m), 'f', 1, 64) + u.s
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

func (s *Size) String() string { return FormatSize(int64(*s)) }
func (s *Size) Type() string   { return "size" }
func (s *Size) Set(v string) error {
	n, err := size(v)
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

// Count is an element count that accepts the same suffixes as Size (1M = 1048576). It
// only reads the number: the range a count may take is the test's to check
// (runtest.Spec.Validate, for the command line and the library alike).
type Count int64

var errCountSyntax = errors.New("want a whole number of elements with an optional K, M or G suffix, such as 1M")

func (c *Count) String() string { return strconv.FormatInt(int64(*c), 10) }
func (c *Count) Type() string   { return "count" }
func (c *Count) Set(v string) error {
	// A byte unit on a count (16MB) was taken for 16M elements whatever their size.
	if t := strings.ToLower(strings.TrimSpace(v)); strings.HasSuffix(t, "b") {
		return setting.Errorf("a count is of elements, not bytes: drop the B (16M = 16,777,216 elements), or give sizes in bytes where the command takes them (%s, %s)", setting.MinSize, setting.MaxSize)
	}
	n, err := parse(v, errCountSyntax)
	switch {
	case err != nil:
		return err
	case n != math.Trunc(n):
		return fmt.Errorf("%s is not a whole number of elements", strconv.FormatFloat(n, 'f', -1, 64))
	case n >= math.MaxInt64:
		return errors.New("out of range for a whole number")
	}
	// Digits alone are read exactly (a float holds 53 bits: 9999999999999999 read as
	// 10000000000000000).
	if i, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		*c = Count(i)
		return nil
	}
	*c = Count(n)
	return nil
}
