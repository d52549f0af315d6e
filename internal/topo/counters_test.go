package topo_test

import (
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/topo"
	"github.com/symmem/symmem/internal/topo/topotest"
)

// A GPU with 4 active links whose counters advance by a known amount per link.
func TestCountersSumActiveLinks(t *testing.T) {
	step := uint64(0)
	links := map[uint32]int{}
	counter := func(field, link uint32) uint64 {
		links[link]++
		// KiB: data 100 per step and link, raw 113 (TX) and 80 (RX)
		v := map[uint32]uint64{topo.FieldNVLinkDataTX: 100, topo.FieldNVLinkDataRX: 1,
			topo.FieldNVLinkRawTX: 113, topo.FieldNVLinkRawRX: 80}[field]
		return v * step
	}
	m := &topotest.Machine{}
	for i, active := range []int{0, 4} {
		g := topotest.GPU{BusID: bus(i), Counter: counter}
		for l := 0; l < active; l++ {
			g.NVLinks = append(g.NVLinks, topotest.NVLink{Version: topo.NVLink4_0, Remote: topo.RemoteSwitch})
		}
		m.GPUs = append(m.GPUs, g)
	}
	if _, err := topo.OpenCounters(m, "0000:10:00.0"); err == nil || !strings.Contains(err.Error(), "no active NVLink") {
		t.Errorf("GPU without links: %v", err)
	}
	if _, err := topo.OpenCounters(m, "0000:7f:00.0"); err == nil || !strings.Contains(err.Error(), "no GPU on bus") {
		t.Errorf("unknown bus: %v", err)
	}
	if m.Inits() != 0 {
		t.Errorf("a failed OpenCounters left NVML initialised %d times", m.Inits())
	}
	c, err := topo.OpenCounters(m, "0000:11:00.0") // CUDA's spelling of NVML's 00000000:11:00.0
	if err != nil {
		t.Fatal(err)
	}
	step = 1
	a, _ := c.Read()
	step = 3
	b, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	d := b.Sub(a)
	want := topo.LinkSample{DataTx: 2 * 4 * 100 << 10, DataRx: 2 * 4 << 10, RawTx: 2 * 4 * 113 << 10, RawRx: 2 * 4 * 80 << 10}
	if d != want {
		t.Errorf("delta %+v, want %+v", d, want)
	}
	if len(links) != 4 {
		t.Errorf("read links %v, want 0..3", links)
	}
	c.Close()
	if m.Inits() != 0 {
		t.Errorf("Close left NVML initialised %d times", m.Inits())
	}
}

// A counter NVML cannot read fails the reading, naming the field and link.
func TestCountersFieldError(t *testing.T) {
	m := topotest.H200s(1, true) // links, but no counters
	if _, err := topo.OpenCounters(m, "0000:18:00.0"); err == nil || err.Error() != "NVLink counter 138 of link 0: Not Supported" {
		t.Errorf("OpenCounters: %v", err)
	}
}
