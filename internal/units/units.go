// Package units parses and prints byte sizes the way users type them: 4, 4K, 256M,
// 1G, 1GiB (all binary multiples).
package units

import (
	"fmt"
	"strconv"
	"strings"
)

// Size is a byte count that implements pflag.Value.
type Size int64

var suffixes = []struct {
	s string
	m int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"tb", 1 << 40},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}, {"b", 1},
}

// ParseSize reads "256M", "4K", "1GiB" or a plain number of bytes.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, suf := range suffixes {
		if strings.HasSuffix(t, suf.s) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, suf.s)), suf.m
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional K, M, G or T suffix (e.g. 256M)", s)
	}
	v := n * float64(mult)
	if v > 1<<62 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(v), nil
}

// FormatSize prints n compactly: 4B, 64K, 256M, 1G, or 1.5M when not a round multiple.
func FormatSize(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
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
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

// Count is an element count that accepts the same suffixes as Size (1M = 1048576).
type Count int64

func (c *Count) String() string { return strconv.FormatInt(int64(*c), 10) }
func (c *Count) Type() string   { return "count" }
func (c *Count) Set(v string) error {
	t := strings.TrimSpace(v)
	if strings.HasPrefix(t, "-") {
		return fmt.Errorf("count %q must not be negative", v)
	}
	n, err := ParseSize(t)
	if err != nil {
		return fmt.Errorf("count %q: want a number with an optional K, M or G suffix", v)
	}
	*c = Count(n)
	return nil
}
