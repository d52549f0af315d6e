package topo_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/topo"
	"github.com/symmem/symmem/internal/topo/topotest"
)

func bus(i int) string { return fmt.Sprintf("00000000:%02X:00.0", 0x10+i) }

// Two GPUs joined directly by 18 NVLink 4 links (no switch), a third on PCIe Gen5 x16.
func TestDirectNVLinkAndPCIe(t *testing.T) {
	m := &topotest.Machine{Driver: "580.159.04", CUDA: 13000}
	for i := 0; i < 3; i++ {
		g := topotest.GPU{Name: "NVIDIA H200", BusID: bus(i), Memory: topo.Memory{Total: 100, Free: 90},
			Ancestor: topo.TopologySystem, PCIeGen: 5, PCIeWidth: 16}
		for l := 0; i < 2 && l < 18; l++ {
			// lower-case remote bus IDs: the match must not depend on case
			g.NVLinks = append(g.NVLinks, topotest.NVLink{Version: topo.NVLink4_0, Remote: topo.RemoteGPU,
				RemoteBusID: strings.ToLower(bus(1 - i))})
		}
		m.GPUs = append(m.GPUs, g)
	}
	top, err := topo.Read(m)
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
	if top.Driver != "580.159.04" || top.CUDA != 13000 || top.GPUs[0].BusID != "0000:10:00.0" || len(top.Notes) != 0 {
		t.Errorf("driver %q, CUDA %d, bus %q, notes %q", top.Driver, top.CUDA, top.GPUs[0].BusID, top.Notes)
	}
	if m.Inits() != 0 {
		t.Errorf("Read left NVML initialised %d times", m.Inits())
	}
}

// Every GPU of an NVSwitch board reaches every other at the rate of its own links.
func TestNVSwitch(t *testing.T) {
	top, err := topo.Read(topotest.H200s(8, true))
	if err != nil {
		t.Fatal(err)
	}
	for i := range top.Links {
		for j, l := range top.Links[i] {
			if i != j && (l.Label() != "NV18" || l.GBps != 478.125) {
				t.Errorf("GPU%d-GPU%d = %+v, want NV18 at 478.125 GB/s", i, j, l)
			}
		}
	}
}

// A GPU without NVLink says Not Supported, which is no news; any other failure is noted.
func TestNVLinkStateErrors(t *testing.T) {
	m := topotest.H200s(2, false)
	m.GPUs[0].LinkErr = topotest.Err(topo.ErrorNotSupported)
	m.GPUs[1].LinkErr = &topo.Error{Code: 999, Text: "Unknown Error"}
	top, err := topo.Read(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"GPU 1 link 0 state: Unknown Error"}; fmt.Sprint(top.Notes) != fmt.Sprint(want) {
		t.Errorf("notes %q, want %q", top.Notes, want)
	}
	if l := top.Links[0][1]; l.Label() != "PHB" || l.GBps != 63.008 {
		t.Errorf("GPU0-GPU1 = %+v, want PHB at 63.008 GB/s", l)
	}
}

func TestNoNVML(t *testing.T) {
	m := &topotest.Machine{InitErr: topotest.Err(topo.ErrorLibraryNotFound)}
	if _, err := topo.Read(m); err == nil || err.Error() != "NVML: NVML Shared Library Not Found" {
		t.Errorf("Read: %v", err)
	}
	if _, err := topo.OpenCounters(m, "0000:18:00.0"); err == nil || !strings.HasPrefix(err.Error(), "NVML: ") {
		t.Errorf("OpenCounters: %v", err)
	}
}
