package units

import "testing"

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"4": 4, "4K": 4096, "256M": 256 << 20, "1G": 1 << 30, "1GiB": 1 << 30, "2kb": 2048, "1.5M": 3 << 19} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "12Q"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	if s := FormatSize(256 << 20); s != "256M" {
		t.Errorf("FormatSize = %s", s)
	}
}
