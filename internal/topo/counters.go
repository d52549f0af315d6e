package topo

import (
	"encoding/binary"
	"fmt"
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
	lib    NVML
	dev    Device
	values []FieldValue
}

var counterFields = []uint32{FieldNVLinkDataTX, FieldNVLinkDataRX, FieldNVLinkRawTX, FieldNVLinkRawRX}

// OpenCounters finds the GPU on PCI bus busID (as CUDA writes it) and its active
// NVLinks, and checks that NVML serves their counters. Close releases NVML.
func OpenCounters(lib NVML, busID string) (*Counters, error) {
	if err := lib.Init(); err != nil {
		return nil, fmt.Errorf("NVML: %v", err)
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
	n, err := c.lib.DeviceCount()
	if err != nil {
		return fmt.Errorf("NVML device count: %v", err)
	}
	want := normBus(busID)
	for i := 0; i < n; i++ {
		d, err := c.lib.DeviceByIndex(i)
		if err != nil {
			continue
		}
		if bus, err := d.PCIBusID(); err != nil || normBus(bus) != want {
			continue
		}
		c.dev = d
		for l := 0; l < MaxNVLinks; l++ {
			if active, err := d.NVLinkActive(l); err == nil && active {
				for _, f := range counterFields {
					c.values = append(c.values, FieldValue{FieldID: f, ScopeID: uint32(l)})
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
		c.values[i].Return, c.values[i].Value = Success, [8]byte{}
	}
	if err := c.dev.FieldValues(c.values); err != nil {
		return LinkSample{}, fmt.Errorf("NVLink counters: %v", err)
	}
	var s LinkSample
	for _, v := range c.values {
		if v.Return != Success {
			return LinkSample{}, fmt.Errorf("NVLink counter %d of link %d: %s", v.FieldID, v.ScopeID, c.lib.ErrorString(v.Return))
		}
		kib := binary.NativeEndian.Uint64(v.Value[:]) // unsigned long long, KiB
		switch v.FieldID {
		case FieldNVLinkDataTX:
			s.DataTx += kib << 10
		case FieldNVLinkDataRX:
			s.DataRx += kib << 10
		case FieldNVLinkRawTX:
			s.RawTx += kib << 10
		case FieldNVLinkRawRX:
			s.RawRx += kib << 10
		}
	}
	return s, nil
}

// Close releases NVML.
func (c *Counters) Close() { c.lib.Shutdown() }
