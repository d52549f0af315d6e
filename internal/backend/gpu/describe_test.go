package gpu

import (
	"strings"
	"testing"
)

// A result's GPU names the device by name and UUID where the driver gave one.
func TestDescribeNamesTheUUID(t *testing.T) {
	w := newWorld(t, 1, 1<<16)
	b, _ := w.open(t, 0, Config{})
	if gpu, _, _ := b.Describe(); gpu != "NVIDIA H200" {
		t.Errorf("Describe() without a UUID = %q, want the name alone", gpu)
	}
	b.info.UUID = "GPU-c9e997a7-4c93-a59d-9408-e30d6afeff7d"
	if gpu, _, _ := b.Describe(); !strings.HasSuffix(gpu, "(GPU-c9e997a7-4c93-a59d-9408-e30d6afeff7d)") {
		t.Errorf("Describe() = %q, want the UUID after the name", gpu)
	}
}
