// Package topo reads how the GPUs are linked, through NVML (NVIDIA/go-nvml, which
// opens libnvidia-ml at run time): NVLink count and rate between each pair, or the PCIe
// path. The bench uses it for the link's peak; check-nvshmem prints it as a matrix.
package topo

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Link is the connection from one GPU to another.
type Link struct {
	NVLinks  int     `json:"nvlinks"`
	GBps     float64 `json:"peak_gbps"` // per direction
	PCIePath string  `json:"pcie_path,omitempty"`
}

// Label prints a link the way nvidia-smi topo does: NV18, or a PCIe path.
func (l Link) Label() string {
	if l.NVLinks > 0 {
		return fmt.Sprintf("NV%d", l.NVLinks)
	}
	if l.PCIePath != "" {
		return l.PCIePath
	}
	return "-"
}

// GPU is one device as NVML sees it.
type GPU struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	BusID     string `json:"bus_id"`
	Driver    string `json:"-"`
	MemBytes  uint64 `json:"memory_bytes"`
	FreeBytes uint64 `json:"free_bytes"`
}

// Topology is every GPU and the link between each pair.
type Topology struct {
	Driver string   `json:"driver"`
	CUDA   int      `json:"cuda_driver_version"`
	GPUs   []GPU    `json:"gpus"`
	Links  [][]Link `json:"links"` // Links[i][j], i != j
	// Notes records NVLink queries that failed, so a missing link can be explained.
	Notes []string `json:"notes,omitempty"`
}

// nvlinkGBps is one NVLink's rate per direction, by the nvmlNvlinkVersion_t that
// GetNvLinkVersion returns (1.0, 2.0, 2.2, 3.0, 3.1, 4.0, 5.0, 6.0).
var nvlinkGBps = map[uint32]float64{
	uint32(nvml.NVLINK_VERSION_1_0): 20, uint32(nvml.NVLINK_VERSION_2_0): 25, uint32(nvml.NVLINK_VERSION_2_2): 25,
	uint32(nvml.NVLINK_VERSION_3_0): 25, uint32(nvml.NVLINK_VERSION_3_1): 25, uint32(nvml.NVLINK_VERSION_4_0): 26.5625,
	uint32(nvml.NVLINK_VERSION_5_0): 50, uint32(nvml.NVLINK_VERSION_6_0): 100,
}

// pcieGBps is one PCIe lane's usable rate per direction, by generation.
var pcieGBps = map[int]float64{1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}

var levels = map[nvml.GpuTopologyLevel]string{
	nvml.TOPOLOGY_INTERNAL: "X", nvml.TOPOLOGY_SINGLE: "PIX", nvml.TOPOLOGY_MULTIPLE: "PXB",
	nvml.TOPOLOGY_HOSTBRIDGE: "PHB", nvml.TOPOLOGY_NODE: "NODE", nvml.TOPOLOGY_SYSTEM: "SYS",
}

func normBus(s string) string {
	s = strings.ToLower(strings.TrimRight(s, "\x00"))
	// NVML writes 8-digit domains (00000000:07:00.0); keep the last 12 characters.
	if len(s) > 12 {
		s = s[len(s)-12:]
	}
	return s
}

func busString(b [32]int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// Read queries lib (nvml.New() for the real library, a mock in tests).
func Read(lib nvml.Interface) (*Topology, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML: %s", lib.ErrorString(ret))
	}
	defer lib.Shutdown()
	t := &Topology{}
	t.Driver, _ = lib.SystemGetDriverVersion()
	t.CUDA, _ = lib.SystemGetCudaDriverVersion()
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML device count: %s", lib.ErrorString(ret))
	}
	devs := make([]nvml.Device, n)
	byBus := map[string]int{}
	for i := 0; i < n; i++ {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML device %d: %s", i, lib.ErrorString(ret))
		}
		devs[i] = d
		g := GPU{Index: i}
		g.Name, _ = d.GetName()
		if pci, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
			g.BusID = normBus(busString(pci.BusId))
			byBus[g.BusID] = i
		}
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemBytes, g.FreeBytes = mem.Total, mem.Free
		}
		t.GPUs = append(t.GPUs, g)
	}
	t.Links = make([][]Link, n)
	for i := range t.Links {
		t.Links[i] = make([]Link, n)
	}
	t.nvlinks(lib, devs, byBus)
	t.pcie(devs)
	return t, nil
}

// nvlinks counts each GPU's NVLinks by the GPU at their far end; links to an NVSwitch
// join a GPU to every other GPU on the switch fabric.
func (t *Topology) nvlinks(lib nvml.Interface, devs []nvml.Device, byBus map[string]int) {
	n := len(devs)
	switchLinks := make([]int, n)
	switchRate := make([]float64, n)
	for i, d := range devs {
		for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
			st, ret := d.GetNvLinkState(l)
			if ret != nvml.SUCCESS || st != nvml.FEATURE_ENABLED {
				if l == 0 && ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED {
					t.Notes = append(t.Notes, fmt.Sprintf("GPU %d link 0 state: %s", i, lib.ErrorString(ret)))
				}
				continue
			}
			ver, _ := d.GetNvLinkVersion(l)
			rate := nvlinkGBps[ver]
			if rate == 0 {
				rate = 25
			}
			if typ, ret := d.GetNvLinkRemoteDeviceType(l); ret == nvml.SUCCESS && typ == nvml.NVLINK_DEVICE_TYPE_SWITCH {
				switchLinks[i]++
				switchRate[i] += rate
				continue
			}
			rp, ret := d.GetNvLinkRemotePciInfo(l)
			if ret != nvml.SUCCESS {
				t.Notes = append(t.Notes, fmt.Sprintf("GPU %d link %d remote: %s", i, l, lib.ErrorString(ret)))
				continue
			}
			remote := normBus(busString(rp.BusId))
			j, ok := byBus[remote]
			if !ok || j == i {
				t.Notes = append(t.Notes, fmt.Sprintf("GPU %d link %d goes to %q, which is no GPU here", i, l, remote))
				continue
			}
			t.Links[i][j].NVLinks++
			t.Links[i][j].GBps += rate
		}
	}
	for i := range devs {
		for j := range devs {
			if i != j && switchLinks[i] > 0 && switchLinks[j] > 0 && t.Links[i][j].NVLinks == 0 {
				t.Links[i][j].NVLinks = min(switchLinks[i], switchLinks[j])
				t.Links[i][j].GBps = min(switchRate[i], switchRate[j])
			}
		}
	}
}

// pcie fills the PCIe path and rate of every pair that NVLink does not join.
func (t *Topology) pcie(devs []nvml.Device) {
	for i, d := range devs {
		for j, e := range devs {
			if i == j || t.Links[i][j].NVLinks > 0 {
				continue
			}
			if lvl, ret := d.GetTopologyCommonAncestor(e); ret == nvml.SUCCESS {
				t.Links[i][j].PCIePath = levels[lvl]
			} else {
				t.Links[i][j].PCIePath = "PCIe"
			}
			gen, r1 := d.GetCurrPcieLinkGeneration()
			width, r2 := d.GetCurrPcieLinkWidth()
			if r1 == nvml.SUCCESS && r2 == nvml.SUCCESS {
				t.Links[i][j].GBps = pcieGBps[gen] * float64(width)
			}
		}
	}
}

// Peak is the link rate from GPU i to GPU j in GB/s, 0 when unknown.
func (t *Topology) Peak(i, j int) float64 {
	if t == nil || i >= len(t.Links) || j >= len(t.Links) {
		return 0
	}
	return t.Links[i][j].GBps
}
