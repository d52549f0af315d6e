package reference

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
)

// shipped is the figures, taken from docs/results (TestShippedMatchesResults keeps
// them equal to the files; -update copies the files' figures in).
//
//go:embed reference.json
var shipped []byte

// Version is the format of reference.json.
const Version = 1

// Table is every machine symmem has figures for.
type Table struct {
	Version  int       `json:"version"`
	Machines []Machine `json:"machines"`
}

// Machine is the figures of one kind of machine: a GPU model, a rank count, and the
// link between rank 0 and rank nproc/2 as bench's header names it (NV18).
type Machine struct {
	GPU     string   `json:"gpu"`
	NProc   int      `json:"nproc"`
	Link    string   `json:"link"`
	Figures []Figure `json:"figures"`
}

// Name is how messages name the machine: NVIDIA H200 x2 NV18.
func (m Machine) Name() string { return Name(m.GPU, m.NProc, m.Link) }

// Name names a machine of n ranks on gpu joined by link ("" unknown).
func Name(gpu string, n int, link string) string {
	s := fmt.Sprintf("%s x%d", gpu, n)
	if link != "" {
		s += " " + link
	}
	return s
}

// Figure is one row of a result file of docs/results: the row it measured and its
// figure by Metric.
type Figure struct {
	Op    string `json:"op"`
	Impl  string `json:"impl"`
	Size  int64  `json:"size"`
	Src   int    `json:"src"`
	Dst   int    `json:"dst"`
	Ranks int    `json:"ranks,omitempty"` // a collective's
	DType string `json:"dtype,omitempty"`
	// Metric names the figure (Metrics): gbps, busbw or time_us.
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	// Source is the file of docs/results it comes from.
	Source string `json:"source"`
}

// Key is the row of a result the figure stands for.
func (f Figure) Key() result.RowKey {
	return result.RowKey{Op: f.Op, Impl: f.Impl, Size: f.Size, Src: f.Src, Dst: f.Dst, Ranks: f.Ranks, DType: f.DType}
}

// keyOf is the key a figure is looked up by: the row's, less the algorithm the
// implementation chose (the figure is the implementation's, whichever it picks).
func keyOf(r result.Row) result.RowKey {
	k := r.Key()
	k.Algo = ""
	return k
}

// Shipped is the figures symmem carries.
func Shipped() (Table, error) { return Parse(shipped) }

// Parse reads a table in reference.json's format and checks it.
func Parse(b []byte) (Table, error) {
	var t Table
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("reference figures: %v", err)
	}
	if t.Version != Version {
		return t, fmt.Errorf("reference figures: version %d, this symmem reads %d", t.Version, Version)
	}
	for _, m := range t.Machines {
		for _, f := range m.Figures {
			met, ok := metricNamed(f.Metric)
			switch {
			case !ok:
				return t, fmt.Errorf("reference figures of %s: %s %s: unknown metric %q", m.Name(), f.Op, f.Impl, f.Metric)
			case MetricOf(f.Op).Name != met.Name:
				return t, fmt.Errorf("reference figures of %s: %s is judged by %s, not %s", m.Name(), f.Op, MetricOf(f.Op).Name, f.Metric)
			case !(f.Value > 0):
				return t, fmt.Errorf("reference figures of %s: %s %s %d: figure %g", m.Name(), f.Op, f.Impl, f.Size, f.Value)
			}
		}
	}
	return t, nil
}

// Names lists the machines, for messages: NVIDIA H200 x2 NV18, NVIDIA H200 x4 NV18.
func (t Table) Names() string {
	var s []string
	for _, m := range t.Machines {
		s = append(s, m.Name())
	}
	return strings.Join(s, ", ")
}

// Sweep is the key sweep: the rows the figures stand for (put at 16 and 256 MiB, the
// 8-byte latency, all-reduce of bf16 at 16 and 256 MiB, by the triton implementation),
// with base's iterations and warm-up (bench's defaults) and 5 repetitions. 1 MiB is
// left out: there the host's launch cost, not the link, sets a put's time, and it
// moves from run to run by more than any tolerance worth setting.
func Sweep(base result.BenchSpec) result.BenchSpec {
	s := base
	s.Ops = []string{ops.Put, ops.Latency, ops.AllReduce}
	s.Impls = []string{"triton"}
	s.MinSize, s.MaxSize, s.Factor = 16<<20, 256<<20, 16
	s.Reps = 5
	s.DType = "bf16"
	s.LatencySize = 8
	return s
}

// Metric is what a figure measures, and what usually puts a row below it.
type Metric struct {
	Name string
	Unit string
	// Lower: smaller is better (a time).
	Lower bool
	// Causes are what usually puts a row below its figure, the likeliest first.
	Causes []string
	fits   func(ops.Op) bool
	of     func(result.Row) float64
}

// Metrics are the figures' measures; an op is judged by the first that fits it.
var Metrics = []Metric{
	{Name: "time_us", Unit: "us", Lower: true, fits: ops.Op.RoundTrip, of: func(r result.Row) float64 { return r.MedUS },
		Causes: []string{
			"another job on the GPU: its kernels take turns with the ping-pong (nvidia-smi lists the processes)",
			"the proxy path in place of peer-to-peer: NVSHMEM_DISABLE_P2P=1, or no peer access between the GPUs",
			"clocks held down by power management or heat (nvidia-smi -q -d PERFORMANCE)",
		}},
	{Name: "busbw", Unit: "GB/s busbw", fits: ops.Op.IsCollective, of: func(r result.Row) float64 { return r.BusGBps },
		Causes: []string{
			"one slow link or GPU holds back every rank (symmem bench --op put --matrix finds the pair)",
			"a link down or trained slower: fewer NVLinks than the reference's (nvidia-smi nvlink --status)",
			"another job on these GPUs or their links (nvidia-smi lists the processes)",
			"clocks held down by power or heat (nvidia-smi -q -d PERFORMANCE)",
		}},
	{Name: "gbps", Unit: "GB/s", fits: func(ops.Op) bool { return true }, of: func(r result.Row) float64 { return r.GBps },
		Causes: []string{
			"a link down or trained slower: fewer NVLinks than the reference's (nvidia-smi nvlink --status)",
			"traffic on PCIe instead of NVLink: no peer access, NVSHMEM_DISABLE_P2P=1, or NVLink inactive (nvidia-smi topo -m)",
			"another job on these GPUs or their links (nvidia-smi lists the processes)",
			"clocks held down by power or heat (nvidia-smi -q -d PERFORMANCE)",
		}},
}

// MetricOf is the metric op is judged by.
func MetricOf(op string) Metric {
	for _, m := range Metrics {
		if m.fits(ops.Op(op)) {
			return m
		}
	}
	return Metrics[len(Metrics)-1]
}

func metricNamed(name string) (Metric, bool) {
	for _, m := range Metrics {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// Of is the row's figure by the metric.
func (m Metric) Of(r result.Row) float64 { return m.of(r) }

// Ratio is how measured stands to ref as performance: 1 level, above 1 better, below
// worse (a bandwidth measured/ref; a time ref/measured).
func (m Metric) Ratio(measured, ref float64) float64 {
	switch {
	case ref <= 0:
		return 0
	case m.Lower && measured > 0:
		return ref / measured
	case m.Lower:
		return 0
	}
	return measured / ref
}
