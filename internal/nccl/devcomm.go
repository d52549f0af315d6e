package nccl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/symmem/symmem/internal/dl"
)

// DeviceSince is the first NCCL release with the device API (nccl_device.h: LSA
// pointers and barriers, multimem, GIN) and ncclDevCommCreate.
var DeviceSince = Version{2, 28, 0}

// DevCommBytes is sizeof(ncclDevComm) in NCCL 2.28 on 64-bit Linux
// (nccl_device/impl/comm__types.h). The binding keeps the struct as bytes: only the
// kernels read it, through the headers they were built against.
const DevCommBytes = 200

// DevCommRequirements is ncclDevCommRequirements (nccl_device/core.h), field for field,
// as a C compiler lays it out on 64-bit Linux: 56 bytes, the offsets in the comments
// (TestDevCommRequirementsLayout checks them against the fake library's offsetof). NCCL
// 2.28 has no initializer macro for it; its examples zero it (`= {}`), as the Go zero
// value is.
type DevCommRequirements struct {
	ResourceRequirementsList uintptr // 0: ncclDevResourceRequirements_t*
	TeamRequirementsList     uintptr // 8: ncclTeamRequirements_t*
	LSAMultimem              bool    // 16: multimem on the LSA team (NVLink SHARP)
	BarrierCount             int32   // 20
	LSABarrierCount          int32   // 24: LSA barriers; a kernel's block b uses barrier b
	RailGinBarrierCount      int32   // 28
	LSALLA2ABlockCount       int32   // 32
	LSALLA2ASlotCount        int32   // 36
	GinForceEnable           bool    // 40
	GinContextCount          int32   // 44
	GinSignalCount           int32   // 48
	GinCounterCount          int32   // 52
}

// devCommRequirementsBytes is sizeof(ncclDevCommRequirements) in NCCL 2.28.
const devCommRequirementsBytes = 56

// The layout above, checked when the package is built.
var _ = [1]struct{}{}[unsafe.Sizeof(DevCommRequirements{})-devCommRequirementsBytes]

// devCommGuard is how many bytes past DevCommBytes ncclDevCommCreate is given, filled
// with guardByte: a release whose ncclDevComm grew would otherwise write past the Go
// array, and its kernels, built against 2.28's headers, would read another layout.
const (
	devCommGuard = 256
	guardByte    = 0xa5
)

// devCommBuf is a device communicator's bytes with the guard after them.
type devCommBuf = [DevCommBytes + devCommGuard]byte

// deviceFns are the device API's host entry points, bound when present.
type deviceFns struct {
	create  func(comm uintptr, req *DevCommRequirements, out *devCommBuf) Result
	destroy func(comm uintptr, dc *devCommBuf) Result
	missing string
}

func (d *deviceFns) bind(lib *dl.Lib) {
	for _, b := range []dl.Binding{
		{Fn: &d.create, Names: []string{"ncclDevCommCreate"}},
		{Fn: &d.destroy, Names: []string{"ncclDevCommDestroy"}},
	} {
		if err := lib.Bind(b.Fn, b.Names...); err != nil {
			d.missing = b.Names[0]
			return
		}
	}
}

// Device says whether the library can make device communicators (and registers the
// windows their kernels use): nil, or an *UnsupportedError naming the release needed.
func (l *Lib) Device() error {
	if l.version.less(DeviceSince) || l.dev.missing != "" {
		return &UnsupportedError{Feature: "device API", Need: DeviceSince, Found: l.version, Missing: l.dev.missing, Path: l.Path}
	}
	return l.Symmetric()
}

// DevComm is a device communicator: what kernels calling NCCL's device API take (by
// value, as the 200 bytes of ncclDevComm).
type DevComm struct {
	comm  *Comm
	Bytes [DevCommBytes]byte
	guard [devCommGuard]byte // right after Bytes: see devCommGuard
	live  bool
}

// buf is Bytes and the guard, as the library reads and writes them.
func (d *DevComm) buf() *devCommBuf {
	return (*devCommBuf)(unsafe.Pointer(&d.Bytes))
}

// The guard must follow Bytes with nothing between (byte arrays need no padding).
var _ = [1]struct{}{}[unsafe.Offsetof(DevComm{}.guard)-unsafe.Offsetof(DevComm{}.Bytes)-DevCommBytes]

var errDevDestroyed = errors.New("the NCCL device communicator was destroyed")

// CreateDevComm makes a device communicator with the resources req asks for
// (collective: every rank calls it with the same requirements).
func (c *Comm) CreateDevComm(req DevCommRequirements) (*DevComm, error) {
	if err := c.lib.Device(); err != nil {
		return nil, err
	}
	if c.h == 0 {
		return nil, fmt.Errorf("ncclDevCommCreate: %w", errDestroyed)
	}
	if req.LSABarrierCount < 0 || req.BarrierCount < 0 {
		return nil, fmt.Errorf("ncclDevCommCreate: negative barrier count (%d LSA, %d world)", req.LSABarrierCount, req.BarrierCount)
	}
	d := &DevComm{comm: c}
	for i := range d.guard {
		d.guard[i] = guardByte
	}
	if err := c.lib.check("ncclDevCommCreate", c.lib.dev.create(c.h, &req, d.buf()), c.h); err != nil {
		return nil, fmt.Errorf("rank %d making a device communicator with %d LSA barriers: %w", c.rank, req.LSABarrierCount, err)
	}
	d.live = true
	for _, b := range d.guard {
		if b != guardByte {
			d.Destroy()
			return nil, fmt.Errorf("ncclDevCommCreate: NCCL %s wrote a device communicator larger than NCCL 2.28's %d bytes, which the nccl-device kernels were built for: use NCCL 2.28, or rebuild the kernels and symmem for this NCCL", c.lib.version, DevCommBytes)
		}
	}
	return d, nil
}

// Destroy frees the device communicator (collective), before its communicator goes.
func (d *DevComm) Destroy() error {
	if !d.live {
		return fmt.Errorf("ncclDevCommDestroy: %w", errDevDestroyed)
	}
	if d.comm.h == 0 {
		return fmt.Errorf("ncclDevCommDestroy: %w", errDestroyed)
	}
	d.live = false
	return d.comm.lib.check("ncclDevCommDestroy", d.comm.lib.dev.destroy(d.comm.h, d.buf()), d.comm.h)
}

// LSA is this rank's place in its LSA team, the ranks it reaches by load and store:
// ncclDevComm's lsaRank and lsaSize (bytes 12 and 16 after rank, nRanks and
// nRanks_rcp32).
func (d *DevComm) LSA() (rank, size int) {
	return int(int32(binary.LittleEndian.Uint32(d.Bytes[12:]))), int(int32(binary.LittleEndian.Uint32(d.Bytes[16:])))
}

// Handle is the ncclWindow_t that device code takes (ncclGetLsaPointer's first
// argument): a device address of NCCL's window descriptor.
func (w *Window) Handle() uintptr { return w.h }
