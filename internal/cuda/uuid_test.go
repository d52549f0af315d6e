package cuda

import "testing"

// The UUID reads as nvidia-smi -L printed it for the H200 these bytes came from.
func TestFormatUUID(t *testing.T) {
	u := [16]byte{0xc9, 0xe9, 0x97, 0xa7, 0x4c, 0x93, 0xa5, 0x9d, 0x94, 0x08, 0xe3, 0x0d, 0x6a, 0xfe, 0xff, 0x7d}
	if got, want := FormatUUID(u), "GPU-c9e997a7-4c93-a59d-9408-e30d6afeff7d"; got != want {
		t.Errorf("FormatUUID = %s, want %s", got, want)
	}
}
