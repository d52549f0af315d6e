// Package topotest plays NVML for tests: a Machine of GPUs whose names, NVLinks, PCIe
// paths and NVLink counters are plain data, so topo and everything built on it (the
// check-nvshmem tables, the bench's peaks) can be tested without a GPU.
package topotest

import (
	"encoding/binary"
	"fmt"

	"github.com/symmem/symmem/internal/topo"
)

// Machine is a fake NVML (it implements topo.NVML). The zero value has no GPUs.
type Machine struct {
	Driver string // e.g. 550.54.15
	CUDA   int    // e.g. 12040
	GPUs   []GPU
	// InitErr is what Init answers: set it to play a machine without NVML.
	InitErr error

	inits int // Init calls not yet shut down
}

// GPU is one device of a Machine.
type GPU struct {
	Name   string
	BusID  string // as NVML writes it: 00000000:18:00.0
	Memory topo.Memory
	// NVLinks are the active links, links 0 to len(NVLinks)-1; the others are inactive.
	NVLinks []NVLink
	// LinkErr, when set, answers every NVLink state query.
	LinkErr error
	// Ancestor is where the PCIe tree joins this GPU to every other one.
	Ancestor topo.TopologyLevel
	// PCIeGen and PCIeWidth are the current PCIe link; 0 answers Not Supported.
	PCIeGen, PCIeWidth int
	// Counter is a field's value on an active link (KiB for the NVLink throughput
	// fields); nil answers every field Not Supported.
	Counter func(field, link uint32) uint64
}

// NVLink is one active link.
type NVLink struct {
	Version topo.NVLinkVersion
	Remote  topo.NVLinkRemoteType
	// RemoteBusID is the PCI bus ID at the far end (the peer GPU's, for RemoteGPU).
	RemoteBusID string
}

// H200 names the GPU the way NVML does.
const H200 = "NVIDIA H200 141GB HBM3e"

// H200s is an HGX H200 board of n GPUs (8 on a real one), driver 550.54.15 with CUDA
// 12.4, GPU i on bus 00000000:(0x18+i):00.0 with 139.8 GiB of memory. With nvswitch
// each GPU has 18 NVLink 4 links to the NVSwitches; without, the GPUs meet at a PCIe
// host bridge, Gen5 x16.
func H200s(n int, nvswitch bool) *Machine {
	m := &Machine{Driver: "550.54.15", CUDA: 12040}
	for i := 0; i < n; i++ {
		g := GPU{
			Name:     H200,
			BusID:    fmt.Sprintf("00000000:%02x:00.0", 0x18+i),
			Memory:   topo.Memory{Total: 150109880320, Free: 149000000000, Used: 1109880320},
			Ancestor: topo.TopologyHostBridge,
			PCIeGen:  5, PCIeWidth: 16,
		}
		if nvswitch {
			for l := 0; l < 18; l++ {
				g.NVLinks = append(g.NVLinks, NVLink{Version: topo.NVLink4_0, Remote: topo.RemoteSwitch})
			}
		}
		m.GPUs = append(m.GPUs, g)
	}
	return m
}

// Inits is how many Init calls have not been shut down: 0 once every user is done.
func (m *Machine) Inits() int { return m.inits }

// Err is the error NVML answers code with.
func Err(code topo.Return) error { return &topo.Error{Code: code, Text: errorString(code)} }

// errorString is nvmlErrorString's text for the codes a fake answers.
func errorString(r topo.Return) string {
	switch r {
	case topo.Success:
		return "Success"
	case topo.ErrorUninitialized:
		return "Uninitialized"
	case topo.ErrorInvalidArgument:
		return "Invalid Argument"
	case topo.ErrorNotSupported:
		return "Not Supported"
	case topo.ErrorLibraryNotFound:
		return "NVML Shared Library Not Found"
	}
	return fmt.Sprintf("NVML error %d", r)
}

func (m *Machine) Init() error {
	if m.InitErr != nil {
		return m.InitErr
	}
	m.inits++
	return nil
}

func (m *Machine) Shutdown() error {
	if m.inits == 0 {
		return Err(topo.ErrorUninitialized)
	}
	m.inits--
	return nil
}

func (m *Machine) ErrorString(r topo.Return) string { return errorString(r) }

func (m *Machine) DriverVersion() (string, error) { return m.Driver, m.ready() }

func (m *Machine) CUDADriverVersion() (int, error) { return m.CUDA, m.ready() }

func (m *Machine) DeviceCount() (int, error) { return len(m.GPUs), m.ready() }

func (m *Machine) DeviceByIndex(i int) (topo.Device, error) {
	if err := m.ready(); err != nil {
		return nil, err
	}
	if i < 0 || i >= len(m.GPUs) {
		return nil, Err(topo.ErrorInvalidArgument)
	}
	return &device{m: m, i: i}, nil
}

// ready is NVML's answer to a call made before Init.
func (m *Machine) ready() error {
	if m.inits == 0 {
		return Err(topo.ErrorUninitialized)
	}
	return nil
}

type device struct {
	m *Machine
	i int
}

func (d *device) gpu() *GPU { return &d.m.GPUs[d.i] }

func (d *device) Name() (string, error) { return d.gpu().Name, nil }

func (d *device) PCIBusID() (string, error) { return d.gpu().BusID, nil }

func (d *device) Memory() (topo.Memory, error) { return d.gpu().Memory, nil }

func (d *device) NVLinkActive(link int) (bool, error) {
	if g := d.gpu(); g.LinkErr != nil {
		return false, g.LinkErr
	}
	if link < 0 || link >= topo.MaxNVLinks {
		return false, Err(topo.ErrorInvalidArgument)
	}
	return link < len(d.gpu().NVLinks), nil
}

func (d *device) link(l int) (NVLink, error) {
	if l < 0 || l >= len(d.gpu().NVLinks) {
		return NVLink{}, Err(topo.ErrorInvalidArgument)
	}
	return d.gpu().NVLinks[l], nil
}

func (d *device) NVLinkVersion(link int) (topo.NVLinkVersion, error) {
	l, err := d.link(link)
	return l.Version, err
}

func (d *device) NVLinkRemoteType(link int) (topo.NVLinkRemoteType, error) {
	l, err := d.link(link)
	return l.Remote, err
}

func (d *device) NVLinkRemoteBusID(link int) (string, error) {
	l, err := d.link(link)
	return l.RemoteBusID, err
}

func (d *device) CommonAncestor(other topo.Device) (topo.TopologyLevel, error) {
	o, ok := other.(*device)
	if !ok || o.m != d.m {
		return 0, Err(topo.ErrorInvalidArgument)
	}
	if o.i == d.i {
		return topo.TopologyInternal, nil
	}
	return d.gpu().Ancestor, nil
}

func (d *device) PCIeLink() (gen, width int, err error) {
	g := d.gpu()
	if g.PCIeGen == 0 || g.PCIeWidth == 0 {
		return 0, 0, Err(topo.ErrorNotSupported)
	}
	return g.PCIeGen, g.PCIeWidth, nil
}

func (d *device) FieldValues(values []topo.FieldValue) error {
	if len(values) == 0 {
		return Err(topo.ErrorInvalidArgument)
	}
	g := d.gpu()
	for k := range values {
		v := &values[k]
		if g.Counter == nil || int(v.ScopeID) >= len(g.NVLinks) {
			v.Return = topo.ErrorNotSupported
			continue
		}
		binary.NativeEndian.PutUint64(v.Value[:], g.Counter(v.FieldID, v.ScopeID))
		v.ValueType, v.Return = topo.ValueUint64, topo.Success
	}
	return nil
}
