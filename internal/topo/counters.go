package topo

import (
	"encoding/binary"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// LinkSample is a reading of one GPU's NVLink traffic counters, summed over its active
// links, in bytes. Data counts payload; Raw counts everything the links carried for
// it, packet headers and responses included (nvidia-smi nvlink -gt dr shows the same).
type LinkSample struct {
	DataTx, DataRx, RawTx, RawRx uint64
}

// Sub returns the traffic between an earlier reading o and s.
func (s LinkSample) Sub(o LinkSample) LinkSample {
	return LinkSample{s.DataTx - o.DataTx, s.DataRx - o.DataRx, s.RawTx - o.RawTx, s.RawRx - o.RawRx}
}

// Counters reads one GPU's NVLink throughput counters through NVML.
type Counters struct {
	lib    nvml.Interface
	dev    nvml.Device
	values []nvml.FieldValue
}

var counterFields = []uint32{
	nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
	nvml.FI_DEV_NVLINK_THROUGHPUT_RAW_TX, nvml.FI_DEV_NVLINK_THROUGHPUT_RAW_RX,
}

// OpenCounters finds the GPU on PCI bus busID (as CUDA writes it) and its active
// NVLinks, and checks that NVML serves their counters. Close releases NVML.
func OpenCounters(lib nvml.Interface, busID string) (*Counters, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML: %s", lib.ErrorString(ret))
	}
	c := &Counters{lib: lib}
	if err := c.find(busID); err != nil {
		lib.Shutdown()
		return nil, err
	}
	if _, err := c.Read(); err != nil {
		lib.Shutdown()
		return nil, err
	}
	return c, nil
}

func (c *Counters) find(busID string) error {
	n, ret := c.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("NVML device count: %s", c.lib.ErrorString(ret))
	}
	want := normBus(busID)
	for i := 0; i < n; i++ {
		d, ret := c.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		if pci, ret := d.GetPciInfo(); ret != nvml.SUCCESS || normBus(busString(pci.BusId)) != want {
			continue
		}
		c.dev = d
		for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
			if st, ret := d.GetNvLinkState(l); ret == nvml.SUCCESS && st == nvml.FEATURE_ENABLED {
				for _, f := range counterFields {
					c.values = append(c.values, nvml.FieldValue{FieldId: f, ScopeId: uint32(l)})
				}
			}
		}
		if len(c.values) == 0 {
			return fmt.Errorf("GPU %s has no active NVLink", busID)
		}
		return nil
	}
	return fmt.Errorf("NVML has no GPU on bus %s", busID)
}

// Read returns the counters now.
func (c *Counters) Read() (LinkSample, error) {
	for i := range c.values {
		c.values[i].NvmlReturn, c.values[i].Value = 0, [8]byte{}
	}
	if ret := c.dev.GetFieldValues(c.values); ret != nvml.SUCCESS {
		return LinkSample{}, fmt.Errorf("NVLink counters: %s", c.lib.ErrorString(ret))
	}
	var s LinkSample
	for _, v := range c.values {
		if r := nvml.Return(v.NvmlReturn); r != nvml.SUCCESS {
			return LinkSample{}, fmt.Errorf("NVLink counter %d of link %d: %s", v.FieldId, v.ScopeId, c.lib.ErrorString(r))
		}
		kib := binary.LittleEndian.Uint64(v.Value[:]) // unsigned long long, KiB
		switch v.FieldId {
		case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
			s.DataTx += kib << 10
		case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
			s.DataRx += kib << 10
		case nvml.FI_DEV_NVLINK_THROUGHPUT_RAW_TX:
			s.RawTx += kib << 10
		case nvml.FI_DEV_NVLINK_THROUGHPUT_RAW_RX:
			s.RawRx += kib << 10
		}
	}
	return s, nil
}

// Close releases NVML.
func (c *Counters) Close() { c.lib.Shutdown() }
