// Package topo reads how the GPUs are linked, through NVML (libnvidia-ml, opened at run
// time; see SystemNVML): NVLink count and rate between each pair, or the PCIe path, and
// each GPU's NVLink traffic counters. The bench uses it for the link's peak and for what
// the links carried; check-nvshmem prints it as a matrix. Everything goes through the
// small NVML interface, so topotest can play any machine.
package topo

import (
	"errors"
	"fmt"
	"strings"
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

// nvlinkGBps is one NVLink's rate per direction, by the version NVML reports.
var nvlinkGBps = map[NVLinkVersion]float64{
	NVLink1_0: 20, NVLink2_0: 25, NVLink2_2: 25, NVLink3_0: 25, NVLink3_1: 25, NVLink4_0: 26.5625,
	NVLink5_0: 50, NVLink6_0: 100,
}

// pcieGBps is one PCIe lane's usable rate per direction, by generation.
var pcieGBps = map[int]float64{1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}

var levels = map[TopologyLevel]string{
	TopologyInternal: "X", TopologySingle: "PIX", TopologyMultiple: "PXB",
	TopologyHostBridge: "PHB", TopologyNode: "NODE", TopologySystem: "SYS",
}

func normBus(s string) string {
	s = strings.ToLower(strings.TrimRight(s, "\x00"))
	// NVML writes 8-digit domains (00000000:07:00.0); keep the last 12 characters.
	if len(s) > 12 {
		s = s[len(s)-12:]
	}
	return s
}

// notSupported reports whether err is NVML saying the GPU lacks the feature.
func notSupported(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == ErrorNotSupported
}

// Read queries lib (SystemNVML() for the real library, a topotest.Machine in tests).
func Read(lib NVML) (*Topology, error) {
	if err := lib.Init(); err != nil {
		return nil, fmt.Errorf("NVML: %v", err)
	}
	defer lib.Shutdown()
	t := &Topology{}
	t.Driver, _ = lib.DriverVersion()
	t.CUDA, _ = lib.CUDADriverVersion()
	n, err := lib.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("NVML device count: %v", err)
	}
	devs := make([]Device, n)
	byBus := map[string]int{}
	for i := 0; i < n; i++ {
		d, err := lib.DeviceByIndex(i)
		if err != nil {
			return nil, fmt.Errorf("NVML device %d: %v", i, err)
		}
		devs[i] = d
		g := GPU{Index: i}
		g.Name, _ = d.Name()
		if bus, err := d.PCIBusID(); err == nil {
			g.BusID = normBus(bus)
			byBus[g.BusID] = i
		}
		if mem, err := d.Memory(); err == nil {
			g.MemBytes, g.FreeBytes = mem.Total, mem.Free
		}
		t.GPUs = append(t.GPUs, g)
	}
	t.Links = make([][]Link, n)
	for i := range t.Links {
		t.Links[i] = make([]Link, n)
	}
	t.nvlinks(devs, byBus)
	t.pcie(devs)
	return t, nil
}

// nvlinks counts each GPU's NVLinks by the GPU at their far end; links to an NVSwitch
// join a GPU to every other GPU on the switch fabric.
func (t *Topology) nvlinks(devs []Device, byBus map[string]int) {
	n := len(devs)
	switchLinks := make([]int, n)
	switchRate := make([]float64, n)
	for i, d := range devs {
		for l := 0; l < MaxNVLinks; l++ {
			active, err := d.NVLinkActive(l)
			if err != nil || !active {
				if l == 0 && err != nil && !notSupported(err) {
					t.Notes = append(t.Notes, fmt.Sprintf("GPU %d link 0 state: %v", i, err))
				}
				continue
			}
			ver, _ := d.NVLinkVersion(l)
			rate := nvlinkGBps[ver]
			if rate == 0 {
				rate = 25
			}
			if typ, err := d.NVLinkRemoteType(l); err == nil && typ == RemoteSwitch {
				switchLinks[i]++
				switchRate[i] += rate
				continue
			}
			rbus, err := d.NVLinkRemoteBusID(l)
			if err != nil {
				t.Notes = append(t.Notes, fmt.Sprintf("GPU %d link %d remote: %v", i, l, err))
				continue
			}
			remote := normBus(rbus)
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
func (t *Topology) pcie(devs []Device) {
	for i, d := range devs {
		for j, e := range devs {
			if i == j || t.Links[i][j].NVLinks > 0 {
				continue
			}
			if lvl, err := d.CommonAncestor(e); err == nil {
				t.Links[i][j].PCIePath = levels[lvl]
			} else {
				t.Links[i][j].PCIePath = "PCIe"
			}
			if gen, width, err := d.PCIeLink(); err == nil {
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
