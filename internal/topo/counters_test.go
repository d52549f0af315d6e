package topo

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// A GPU with 4 active links whose counters advance by a known amount per link.
func TestCountersSumActiveLinks(t *testing.T) {
	step := uint64(0)
	links := map[uint32]int{}
	dev := func(i int, active int) *mock.Device {
		return &mock.Device{
			GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{BusId: bus(i)}, nvml.SUCCESS },
			GetNvLinkStateFunc: func(l int) (nvml.EnableState, nvml.Return) {
				if l < active {
					return nvml.FEATURE_ENABLED, nvml.SUCCESS
				}
				return nvml.FEATURE_DISABLED, nvml.SUCCESS
			},
			GetFieldValuesFunc: func(vs []nvml.FieldValue) nvml.Return {
				for k := range vs {
					links[vs[k].ScopeId]++
					// KiB: data 100 per step and link, raw 113 (TX) and 80 (RX)
					v := map[uint32]uint64{nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX: 100, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX: 1,
						nvml.FI_DEV_NVLINK_THROUGHPUT_RAW_TX: 113, nvml.FI_DEV_NVLINK_THROUGHPUT_RAW_RX: 80}[vs[k].FieldId]
					binary.LittleEndian.PutUint64(vs[k].Value[:], v*step)
					vs[k].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
				}
				return nvml.SUCCESS
			},
		}
	}
	devs := []nvml.Device{dev(0, 0), dev(1, 4)}
	lib := &mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		ErrorStringFunc:            func(r nvml.Return) string { return "error" },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) { return devs[i], nvml.SUCCESS },
	}
	if _, err := OpenCounters(lib, "0000:10:00.0"); err == nil || !strings.Contains(err.Error(), "no active NVLink") {
		t.Errorf("GPU without links: %v", err)
	}
	if _, err := OpenCounters(lib, "0000:7f:00.0"); err == nil || !strings.Contains(err.Error(), "no GPU on bus") {
		t.Errorf("unknown bus: %v", err)
	}
	c, err := OpenCounters(lib, "0000:11:00.0") // CUDA's spelling of NVML's 00000000:11:00.0
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	step = 1
	a, _ := c.Read()
	step = 3
	b, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	d := b.Sub(a)
	want := LinkSample{DataTx: 2 * 4 * 100 << 10, DataRx: 2 * 4 << 10, RawTx: 2 * 4 * 113 << 10, RawRx: 2 * 4 * 80 << 10}
	if d != want {
		t.Errorf("delta %+v, want %+v", d, want)
	}
	if len(links) != 4 {
		t.Errorf("read links %v, want 0..3", links)
	}
}
