package units

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"4": 4, "4K": 4096, "256M": 256 << 20, "1G": 1 << 30, "1GiB": 1 << 30, "2kb": 2048, "1.5M": 3 << 19, " 8 ": 8, "0": 0} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "12Q", "1.5", "nan", "inf", "1e3", "0x10", ".", "1.", "2000T", strings.Repeat("9", 400)} {
		if n, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted as %d", bad, n)
		}
	}
	if s := FormatSize(256 << 20); s != "256M" {
		t.Errorf("FormatSize = %s", s)
	}
}

// Errors say what to type and never leak strconv. A count's range is not the parser's
// to check (the test's is): it reads any whole number, exactly.
func TestCountErrors(t *testing.T) {
	for in, want := range map[string]string{
		"1.5":                  "1.5 is not a whole number of elements",
		"0.0001K":              "0.1024 is not a whole number of elements",
		"two":                  "want a whole number of elements with an optional K, M or G suffix",
		"-5":                   "must not be negative",
		"99999999999999999999": "out of range for a whole number",
		"nan":                  "want a whole number",
		"16MB":                 "a count is of elements, not bytes",
		"4kib":                 "a count is of elements, not bytes",
	} {
		var c Count
		err := c.Set(in)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "strconv") {
			t.Errorf("Count.Set(%q) = %v; want an error containing %q", in, err, want)
		}
	}
	for in, want := range map[string]Count{"1.5K": 1536, "0": 0, "2T": 2 << 40, "9999999999999999": 9999999999999999} {
		var c Count
		if err := c.Set(in); err != nil || c != want {
			t.Errorf("Count.Set(%s) = %d, %v; want %d", in, c, err, want)
		}
	}
	var s Size
	if err := s.Set("1.5"); err == nil || err.Error() != "1.5 is not a whole number of bytes" {
		t.Errorf("Size.Set(1.5) = %v", err)
	}
}
