package units

import (
	"strings"
	"testing"
)

// Whatever a user types as a size or a count, the parser answers with a value in range
// or an error that carries no Go internals, and never panics. (FormatSize rounds for
// people, 2100 -> 2.1K, so its text need not parse back: the fuzzer found that.)
func FuzzSizeAndCount(f *testing.F) {
	for _, s := range []string{"4", "4K", "256M", "1G", "1.5K", "1GiB", "0", "-1", "1.5", "nan", "inf", "1e3", "0x10",
		"99999999999999999999", "  2m ", "K", ".", "1.", ".5", "1T", "2T", "1kb", "١٢٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var z Size
		if err := z.Set(s); err == nil {
			if int64(z) < 0 || int64(z) > MaxSize {
				t.Fatalf("size %q accepted as %d, out of 0..%d", s, z, MaxSize)
			}
		} else if msg := err.Error(); strings.Contains(msg, "strconv") || strings.Contains(msg, "invalid syntax") {
			t.Fatalf("size %q: Go internals in %q", s, msg)
		}
		var c Count
		if err := c.Set(s); err == nil {
			if c < 0 {
				t.Fatalf("count %q accepted as %d", s, c)
			}
		} else if msg := err.Error(); strings.Contains(msg, "strconv") || strings.Contains(msg, "invalid syntax") {
			t.Fatalf("count %q: Go internals in %q", s, msg)
		}
	})
}
