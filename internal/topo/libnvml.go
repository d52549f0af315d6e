package topo

import (
	"fmt"
	"sync"

	"github.com/symmem/symmem/internal/dl"
)

// NVMLLibName is the library SystemNVML opens; it comes with the driver.
const NVMLLibName = "libnvidia-ml.so.1"

// SystemNVML is this machine's NVML. The library is opened on the first Init, so a
// machine without it fails there, with an error, and nowhere else.
func SystemNVML() NVML { return systemNVML{} }

// libNVML is the opened libnvidia-ml. Where NVML has versioned an entry point, the
// names are those NVIDIA/go-nvml calls, newest first (its updateVersionedSymbols).
type libNVML struct {
	nvmlInit                            func() Return
	nvmlShutdown                        func() Return
	nvmlErrorString                     func(r Return) *byte
	nvmlSystemGetDriverVersion          func(buf *byte, n uint32) Return
	nvmlSystemGetCudaDriverVersion      func(v *int32) Return
	nvmlDeviceGetCount                  func(n *uint32) Return
	nvmlDeviceGetHandleByIndex          func(i uint32, dev *uintptr) Return
	nvmlDeviceGetName                   func(dev uintptr, buf *byte, n uint32) Return
	nvmlDeviceGetPciInfo                func(dev uintptr, pci *pciInfo) Return
	nvmlDeviceGetMemoryInfo             func(dev uintptr, mem *Memory) Return
	nvmlDeviceGetNvLinkState            func(dev uintptr, link uint32, active *uint32) Return
	nvmlDeviceGetNvLinkVersion          func(dev uintptr, link uint32, v *NVLinkVersion) Return
	nvmlDeviceGetNvLinkRemoteDeviceType func(dev uintptr, link uint32, t *NVLinkRemoteType) Return
	nvmlDeviceGetNvLinkRemotePciInfo    func(dev uintptr, link uint32, pci *pciInfo) Return
	nvmlDeviceGetTopologyCommonAncestor func(a, b uintptr, lvl *TopologyLevel) Return
	nvmlDeviceGetCurrPcieLinkGeneration func(dev uintptr, gen *uint32) Return
	nvmlDeviceGetCurrPcieLinkWidth      func(dev uintptr, width *uint32) Return
	nvmlDeviceGetFieldValues            func(dev uintptr, n int32, values *FieldValue) Return
}

// pciInfo is nvmlPciInfo_t (68 bytes).
type pciInfo struct {
	_              [16]byte // busIdLegacy
	domain         uint32
	bus            uint32
	device         uint32
	pciDeviceID    uint32
	pciSubSystemID uint32
	busID          [32]byte
}

// Buffer sizes nvml.h guarantees large enough.
const (
	driverVersionBufSize = 80 // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
	deviceNameBufSize    = 96 // NVML_DEVICE_NAME_V2_BUFFER_SIZE
)

// nvmlEnabled is nvmlEnableState_t's NVML_FEATURE_ENABLED.
const nvmlEnabled = 1

var (
	loadOnce sync.Once
	loaded   *libNVML
	loadErr  error
)

func loadNVML() (*libNVML, error) {
	loadOnce.Do(func() { loaded, loadErr = bindNVML() })
	return loaded, loadErr
}

func bindNVML() (*libNVML, error) {
	lib, err := dl.Open(NVMLLibName)
	if err != nil {
		return nil, &Error{Code: ErrorLibraryNotFound, Text: fmt.Sprintf("the driver's management library is missing (%v)", err)}
	}
	l := &libNVML{}
	b := func(fn any, names ...string) dl.Binding { return dl.Binding{Fn: fn, Names: names} }
	if err := lib.BindAll([]dl.Binding{
		b(&l.nvmlInit, "nvmlInit_v2", "nvmlInit"),
		b(&l.nvmlShutdown, "nvmlShutdown"),
		b(&l.nvmlErrorString, "nvmlErrorString"),
		b(&l.nvmlSystemGetDriverVersion, "nvmlSystemGetDriverVersion"),
		b(&l.nvmlSystemGetCudaDriverVersion, "nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion_v2"),
		b(&l.nvmlDeviceGetCount, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"),
		b(&l.nvmlDeviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"),
		b(&l.nvmlDeviceGetName, "nvmlDeviceGetName"),
		b(&l.nvmlDeviceGetPciInfo, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"),
		b(&l.nvmlDeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo"),
		b(&l.nvmlDeviceGetNvLinkState, "nvmlDeviceGetNvLinkState"),
		b(&l.nvmlDeviceGetNvLinkVersion, "nvmlDeviceGetNvLinkVersion"),
		b(&l.nvmlDeviceGetNvLinkRemoteDeviceType, "nvmlDeviceGetNvLinkRemoteDeviceType"),
		b(&l.nvmlDeviceGetNvLinkRemotePciInfo, "nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"),
		b(&l.nvmlDeviceGetTopologyCommonAncestor, "nvmlDeviceGetTopologyCommonAncestor"),
		b(&l.nvmlDeviceGetCurrPcieLinkGeneration, "nvmlDeviceGetCurrPcieLinkGeneration"),
		b(&l.nvmlDeviceGetCurrPcieLinkWidth, "nvmlDeviceGetCurrPcieLinkWidth"),
		b(&l.nvmlDeviceGetFieldValues, "nvmlDeviceGetFieldValues"),
	}); err != nil {
		return nil, &Error{Code: ErrorFunctionNotFound, Text: err.Error()}
	}
	return l, nil
}

func (l *libNVML) check(r Return) error {
	if r == Success {
		return nil
	}
	return &Error{Code: r, Text: l.errorString(r)}
}

func (l *libNVML) errorString(r Return) string {
	if s := dl.GoString(l.nvmlErrorString(r)); s != "" {
		return s
	}
	return fmt.Sprintf("NVML error %d", r)
}

// systemNVML holds no state: NVML keeps it, and the bindings are the process's.
type systemNVML struct{}

func (systemNVML) Init() error {
	l, err := loadNVML()
	if err != nil {
		return err
	}
	return l.check(l.nvmlInit())
}

func (systemNVML) Shutdown() error {
	l, err := loadNVML()
	if err != nil {
		return err
	}
	return l.check(l.nvmlShutdown())
}

func (systemNVML) ErrorString(r Return) string {
	l, err := loadNVML()
	if err != nil {
		return fmt.Sprintf("NVML error %d", r)
	}
	return l.errorString(r)
}

func (systemNVML) DriverVersion() (string, error) {
	l, err := loadNVML()
	if err != nil {
		return "", err
	}
	var buf [driverVersionBufSize]byte
	if err := l.check(l.nvmlSystemGetDriverVersion(&buf[0], uint32(len(buf)))); err != nil {
		return "", err
	}
	return cString(buf[:]), nil
}

func (systemNVML) CUDADriverVersion() (int, error) {
	l, err := loadNVML()
	if err != nil {
		return 0, err
	}
	var v int32
	if err := l.check(l.nvmlSystemGetCudaDriverVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

func (systemNVML) DeviceCount() (int, error) {
	l, err := loadNVML()
	if err != nil {
		return 0, err
	}
	var n uint32
	if err := l.check(l.nvmlDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

func (systemNVML) DeviceByIndex(i int) (Device, error) {
	l, err := loadNVML()
	if err != nil {
		return nil, err
	}
	var h uintptr
	if err := l.check(l.nvmlDeviceGetHandleByIndex(uint32(i), &h)); err != nil {
		return nil, err
	}
	return &nvmlDevice{l: l, h: h}, nil
}

// nvmlDevice is an nvmlDevice_t, an opaque pointer NVML owns.
type nvmlDevice struct {
	l *libNVML
	h uintptr
}

func (d *nvmlDevice) Name() (string, error) {
	var buf [deviceNameBufSize]byte
	if err := d.l.check(d.l.nvmlDeviceGetName(d.h, &buf[0], uint32(len(buf)))); err != nil {
		return "", err
	}
	return cString(buf[:]), nil
}

func (d *nvmlDevice) PCIBusID() (string, error) {
	var p pciInfo
	if err := d.l.check(d.l.nvmlDeviceGetPciInfo(d.h, &p)); err != nil {
		return "", err
	}
	return cString(p.busID[:]), nil
}

func (d *nvmlDevice) Memory() (Memory, error) {
	var m Memory
	if err := d.l.check(d.l.nvmlDeviceGetMemoryInfo(d.h, &m)); err != nil {
		return Memory{}, err
	}
	return m, nil
}

func (d *nvmlDevice) NVLinkActive(link int) (bool, error) {
	var st uint32
	if err := d.l.check(d.l.nvmlDeviceGetNvLinkState(d.h, uint32(link), &st)); err != nil {
		return false, err
	}
	return st == nvmlEnabled, nil
}

func (d *nvmlDevice) NVLinkVersion(link int) (NVLinkVersion, error) {
	var v NVLinkVersion
	if err := d.l.check(d.l.nvmlDeviceGetNvLinkVersion(d.h, uint32(link), &v)); err != nil {
		return 0, err
	}
	return v, nil
}

func (d *nvmlDevice) NVLinkRemoteType(link int) (NVLinkRemoteType, error) {
	var t NVLinkRemoteType
	if err := d.l.check(d.l.nvmlDeviceGetNvLinkRemoteDeviceType(d.h, uint32(link), &t)); err != nil {
		return RemoteUnknown, err
	}
	return t, nil
}

func (d *nvmlDevice) NVLinkRemoteBusID(link int) (string, error) {
	var p pciInfo
	if err := d.l.check(d.l.nvmlDeviceGetNvLinkRemotePciInfo(d.h, uint32(link), &p)); err != nil {
		return "", err
	}
	return cString(p.busID[:]), nil
}

func (d *nvmlDevice) CommonAncestor(other Device) (TopologyLevel, error) {
	o, ok := other.(*nvmlDevice)
	if !ok {
		return 0, &Error{Code: ErrorInvalidArgument, Text: fmt.Sprintf("%T is not a device of this NVML", other)}
	}
	var lvl TopologyLevel
	if err := d.l.check(d.l.nvmlDeviceGetTopologyCommonAncestor(d.h, o.h, &lvl)); err != nil {
		return 0, err
	}
	return lvl, nil
}

func (d *nvmlDevice) PCIeLink() (gen, width int, err error) {
	var g, w uint32
	if err := d.l.check(d.l.nvmlDeviceGetCurrPcieLinkGeneration(d.h, &g)); err != nil {
		return 0, 0, err
	}
	if err := d.l.check(d.l.nvmlDeviceGetCurrPcieLinkWidth(d.h, &w)); err != nil {
		return 0, 0, err
	}
	return int(g), int(w), nil
}

func (d *nvmlDevice) FieldValues(values []FieldValue) error {
	if len(values) == 0 {
		return d.l.check(ErrorInvalidArgument) // as NVML answers a count of 0
	}
	return d.l.check(d.l.nvmlDeviceGetFieldValues(d.h, int32(len(values)), &values[0]))
}

// cString is b up to its first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
