package nccl

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/symmem/symmem/internal/dl"
)

// DevCommRequirements is laid out as the C compiler lays out nccl_device/core.h's
// declaration (copied into the fake): the same size and every field at its offset.
func TestDevCommRequirementsLayout(t *testing.T) {
	f := openFakeOf(t, "v228")
	var layout func(out *[13]int64)
	h, err := dl.Open(fakes["v228"])
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Bind(&layout, "fake_devcomm_layout"); err != nil {
		t.Fatal(err)
	}
	f.reset()
	var c [13]int64
	layout(&c)
	var r DevCommRequirements
	got := [13]uintptr{unsafe.Sizeof(r), unsafe.Offsetof(r.ResourceRequirementsList), unsafe.Offsetof(r.TeamRequirementsList),
		unsafe.Offsetof(r.LSAMultimem), unsafe.Offsetof(r.BarrierCount), unsafe.Offsetof(r.LSABarrierCount),
		unsafe.Offsetof(r.RailGinBarrierCount), unsafe.Offsetof(r.LSALLA2ABlockCount), unsafe.Offsetof(r.LSALLA2ASlotCount),
		unsafe.Offsetof(r.GinForceEnable), unsafe.Offsetof(r.GinContextCount), unsafe.Offsetof(r.GinSignalCount),
		unsafe.Offsetof(r.GinCounterCount)}
	for i := range c {
		if int64(got[i]) != c[i] {
			t.Errorf("layout word %d (0 = size, then each field's offset): Go %d, C %d", i, got[i], c[i])
		}
	}
}

// A device communicator is made with the requirements as given (every field reaches
// the library), its 200 bytes are what the library wrote, and destroying it twice, or
// after its bytes were changed, is refused by the fake.
func TestDevCommLifecycle(t *testing.T) {
	f := openFakeOf(t, "v228")
	if err := f.Device(); err != nil {
		t.Fatalf("Device() on a 2.28.9 with every call: %v", err)
	}
	c, err := f.InitRank(2, UniqueID{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	d, err := c.CreateDevComm(DevCommRequirements{LSABarrierCount: 7, BarrierCount: 3, RailGinBarrierCount: 2,
		LSALLA2ABlockCount: 5, LSALLA2ASlotCount: 6, GinContextCount: 9, GinSignalCount: 10, GinCounterCount: 11})
	if err != nil {
		t.Fatal(err)
	}
	if r, n := binary.LittleEndian.Uint32(d.Bytes[0:]), binary.LittleEndian.Uint32(d.Bytes[4:]); r != 1 || n != 2 {
		t.Errorf("ncclDevComm starts rank %d, nRanks %d; want 1, 2", r, n)
	}
	if r, n := d.LSA(); r != 1 || n != 2 {
		t.Errorf("LSA() = %d, %d; want rank 1 of 2", r, n)
	}
	if last := DevCommBytes - 9; d.Bytes[last] != byte(last*13+1) || d.Bytes[DevCommBytes-8] != 1 {
		t.Errorf("the device communicator's last bytes were not written by the library: % x", d.Bytes[DevCommBytes-16:])
	}
	if err := d.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(); err == nil || !strings.Contains(err.Error(), "destroyed") {
		t.Errorf("second Destroy: %v", err)
	}
	// The library sees a copy whose bytes were changed as no device communicator.
	d2, err := c.CreateDevComm(DevCommRequirements{LSABarrierCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	d2.Bytes[100]++
	if err := d2.Destroy(); !errors.Is(err, InvalidArgument) {
		t.Errorf("Destroy of a changed device communicator: err = %v, want ncclInvalidArgument", err)
	}
	want := []string{
		"ncclCommInitRank",
		"ncclDevCommCreate(comm=1/2, lists=null/null, lsaMultimem=0, barrierCount=3, lsaBarrierCount=7, rail=2, lla2a=5/6, ginForceEnable=0, gin=9/10/11)",
		"ncclDevCommDestroy(comm=1/2, live)",
		"ncclDevCommCreate(comm=1/2, lists=null/null, lsaMultimem=0, barrierCount=0, lsaBarrierCount=1,",
		"ncclDevCommDestroy(comm=1/2, CORRUPT)",
	}
	got := f.calls()
	if len(got) != len(want) {
		t.Fatalf("calls = %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("call %d = %q, want %q", i, got[i], want[i])
		}
	}
	// What the fake refuses comes back with NCCL's last-error text.
	if _, err := c.CreateDevComm(DevCommRequirements{LSAMultimem: true}); !errors.Is(err, InvalidUsage) || !strings.Contains(err.Error(), "no multimem") {
		t.Errorf("multimem on the fake: %v", err)
	}
}

// A release whose ncclDevComm is larger than 2.28's is refused once it has written it,
// naming the sizes, and the device communicator it made is destroyed: its kernels,
// built for 2.28's 200 bytes, would read another layout.
func TestDevCommLargerThanBuiltFor(t *testing.T) {
	f := openFakeOf(t, "bigdev")
	c, err := f.InitRank(1, UniqueID{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	d, err := c.CreateDevComm(DevCommRequirements{LSABarrierCount: 1})
	if d != nil || err == nil || !strings.Contains(err.Error(), "NCCL 2.29.0 wrote a device communicator larger than NCCL 2.28's 200 bytes") {
		t.Fatalf("CreateDevComm on a 264-byte ncclDevComm: %v, %v", d, err)
	}
	if calls := f.calls(); len(calls) != 3 || !strings.HasPrefix(calls[2], "ncclDevCommDestroy(comm=0/1, live)") {
		t.Errorf("calls %q, want the device communicator destroyed", calls)
	}
}

// A 2.27 has windows but no device API, and a 2.28 without ncclDevCommCreate is refused
// naming it: both before any call.
func TestDeviceUnsupported(t *testing.T) {
	for _, tc := range []struct{ fake, says string }{
		{"", "NCCL 2.27.3 has no device API: it needs NCCL 2.28 or newer"},
		{"nodev", "(the library does not export ncclDevCommCreate)"},
		{"nowin", "NCCL 2.26.0 has no device API"},
	} {
		f := openFakeOf(t, tc.fake)
		err := f.Device()
		var u *UnsupportedError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("fake %q: Device() = %v, want %q", tc.fake, err, tc.says)
		}
		c, err := f.InitRank(1, UniqueID{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateDevComm(DevCommRequirements{}); !errors.As(err, &u) {
			t.Errorf("fake %q: CreateDevComm = %v, want the refusal", tc.fake, err)
		}
		c.Destroy()
		if calls := f.calls(); len(calls) != 2 {
			t.Errorf("fake %q: calls %q, want only init and destroy", tc.fake, calls)
		}
	}
}
