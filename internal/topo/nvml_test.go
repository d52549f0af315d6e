package topo

import (
	"testing"
	"unsafe"
)

// The structs NVML fills must match nvml.h byte for byte (sizes and offsets from gcc
// on nvml.h of CUDA 13.0, x86-64 and aarch64 alike).
func TestCLayouts(t *testing.T) {
	var p pciInfo
	var m Memory
	var f FieldValue
	for _, c := range []struct {
		what      string
		got, want uintptr
	}{
		{"sizeof(nvmlPciInfo_t)", unsafe.Sizeof(p), 68},
		{"nvmlPciInfo_t.domain", unsafe.Offsetof(p.domain), 16},
		{"nvmlPciInfo_t.bus", unsafe.Offsetof(p.bus), 20},
		{"nvmlPciInfo_t.device", unsafe.Offsetof(p.device), 24},
		{"nvmlPciInfo_t.pciDeviceId", unsafe.Offsetof(p.pciDeviceID), 28},
		{"nvmlPciInfo_t.pciSubSystemId", unsafe.Offsetof(p.pciSubSystemID), 32},
		{"nvmlPciInfo_t.busId", unsafe.Offsetof(p.busID), 36},
		{"sizeof(nvmlMemory_t)", unsafe.Sizeof(m), 24},
		{"nvmlMemory_t.free", unsafe.Offsetof(m.Free), 8},
		{"nvmlMemory_t.used", unsafe.Offsetof(m.Used), 16},
		{"sizeof(nvmlFieldValue_t)", unsafe.Sizeof(f), 40},
		{"alignof(nvmlFieldValue_t)", unsafe.Alignof(f), 8},
		{"nvmlFieldValue_t.scopeId", unsafe.Offsetof(f.ScopeID), 4},
		{"nvmlFieldValue_t.timestamp", unsafe.Offsetof(f.Timestamp), 8},
		{"nvmlFieldValue_t.latencyUsec", unsafe.Offsetof(f.LatencyUsec), 16},
		{"nvmlFieldValue_t.valueType", unsafe.Offsetof(f.ValueType), 24},
		{"nvmlFieldValue_t.nvmlReturn", unsafe.Offsetof(f.Return), 28},
		{"nvmlFieldValue_t.value", unsafe.Offsetof(f.Value), 32},
		// enums and handles NVML writes through a pointer
		{"sizeof(nvmlReturn_t)", unsafe.Sizeof(Return(0)), 4},
		{"sizeof(nvmlNvlinkVersion_t)", unsafe.Sizeof(NVLinkVersion(0)), 4},
		{"sizeof(nvmlIntNvLinkDeviceType_t)", unsafe.Sizeof(NVLinkRemoteType(0)), 4},
		{"sizeof(nvmlGpuTopologyLevel_t)", unsafe.Sizeof(TopologyLevel(0)), 4},
		{"sizeof(nvmlDevice_t)", unsafe.Sizeof(uintptr(0)), unsafe.Sizeof(unsafe.Pointer(nil))},
	} {
		if c.got != c.want {
			t.Errorf("%s: Go has %d, nvml.h %d", c.what, c.got, c.want)
		}
	}
}

func TestCString(t *testing.T) {
	var p pciInfo
	copy(p.busID[:], "00000000:18:00.0")
	if got := cString(p.busID[:]); got != "00000000:18:00.0" {
		t.Errorf("cString = %q", got)
	}
	if got := cString([]byte("full")); got != "full" {
		t.Errorf("cString without NUL = %q", got)
	}
}

// A machine without libnvidia-ml gets an error from Init, never a panic.
func TestSystemNVMLWithoutLibrary(t *testing.T) {
	lib := SystemNVML()
	err := lib.Init()
	if err == nil {
		lib.Shutdown() // a machine with a driver: nothing to check here
		t.Skip(NVMLLibName + " is installed")
	}
	if e, ok := err.(*Error); !ok || e.Code != ErrorLibraryNotFound {
		t.Errorf("Init: %v (%T)", err, err)
	}
	if _, err := Read(lib); err == nil {
		t.Error("Read without NVML succeeded")
	}
}
