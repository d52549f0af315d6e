package topo

import (
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

func bus(i int) [32]int8 {
	var b [32]int8
	for k, c := range fmt.Sprintf("00000000:%02X:00.0", 0x10+i) {
		b[k] = int8(c)
	}
	return b
}

// Two GPUs joined directly by 18 NVLink 4 links (no switch), a third on PCIe Gen5 x16.
func TestDirectNVLinkAndPCIe(t *testing.T) {
	var devs []nvml.Device
	for i := 0; i < 3; i++ {
		i := i
		devs = append(devs, &mock.Device{
			GetNameFunc:    func() (string, nvml.Return) { return "NVIDIA H200", nvml.SUCCESS },
			GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{BusId: bus(i)}, nvml.SUCCESS },
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
				return nvml.Memory{Total: 100, Free: 90}, nvml.SUCCESS
			},
			GetNvLinkStateFunc: func(l int) (nvml.EnableState, nvml.Return) {
				if i < 2 && l < 18 {
					return nvml.FEATURE_ENABLED, nvml.SUCCESS
				}
				return nvml.FEATURE_DISABLED, nvml.SUCCESS
			},
			GetNvLinkVersionFunc: func(int) (uint32, nvml.Return) { return uint32(nvml.NVLINK_VERSION_4_0), nvml.SUCCESS },
			GetNvLinkRemoteDeviceTypeFunc: func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
				return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
			},
			// lower-case remote bus IDs: the match must not depend on case
			GetNvLinkRemotePciInfoFunc: func(int) (nvml.PciInfo, nvml.Return) {
				var b [32]int8
				for k, c := range fmt.Sprintf("00000000:%02x:00.0", 0x10+(1-i)) {
					b[k] = int8(c)
				}
				return nvml.PciInfo{BusId: b}, nvml.SUCCESS
			},
			GetTopologyCommonAncestorFunc: func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
				return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
			},
			GetCurrPcieLinkGenerationFunc: func() (int, nvml.Return) { return 5, nvml.SUCCESS },
			GetCurrPcieLinkWidthFunc:      func() (int, nvml.Return) { return 16, nvml.SUCCESS },
		})
	}
	lib := &mock.Interface{
		InitFunc:                       func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "580.159.04", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 13000, nvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc:     func(i int) (nvml.Device, nvml.Return) { return devs[i], nvml.SUCCESS },
	}
	top, err := Read(lib)
	if err != nil {
		t.Fatal(err)
	}
	if l := top.Links[0][1]; l.NVLinks != 18 || l.GBps != 478.125 || l.Label() != "NV18" {
		t.Errorf("GPU0-GPU1 = %+v", l)
	}
	if l := top.Links[0][2]; l.NVLinks != 0 || l.Label() != "SYS" || l.GBps < 60 || l.GBps > 64 {
		t.Errorf("GPU0-GPU2 = %+v, want SYS at about 63 GB/s", l)
	}
	if top.Peak(1, 0) != 478.125 || top.GPUs[2].FreeBytes != 90 {
		t.Errorf("peak %g, free %d", top.Peak(1, 0), top.GPUs[2].FreeBytes)
	}
}
