package reference

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/units"
)

// DefaultTolerancePct is how far below its figure a row may fall before it is named:
// the figures' own spread from run to run is a few per cent at these sizes, and what a
// sick node loses (a link down, another job) is far more.
const DefaultTolerancePct = 15

// Verdict is a row's standing against its figure.
type Verdict string

const (
	// OK: within the tolerance of the figure, or above it.
	OK Verdict = "ok"
	// Below: more than the tolerance below the figure.
	Below Verdict = "below"
	// NoFigure: no figure for the row (no reference for the machine, or none for the row).
	NoFigure Verdict = "no reference"
	// Untrusted: wrong bytes arrived or the row went unchecked: its figure means nothing.
	Untrusted Verdict = "wrong data"
)

// Row is one measured row beside its figure.
type Row struct {
	// Name is the row as tables name it: put triton 16M 0->1, all-reduce triton 256M 2 ranks.
	Name     string  `json:"row"`
	Metric   string  `json:"metric"`
	Unit     string  `json:"unit"`
	Measured float64 `json:"measured"`
	// Reference is the figure (0: none), from Source in docs/results.
	Reference float64 `json:"reference,omitempty"`
	Source    string  `json:"source,omitempty"`
	// Ratio is the measurement as a share of the figure, as performance (Metric.Ratio):
	// 0.8 is 20% below it, whether a bandwidth fell or a time grew.
	Ratio   float64 `json:"ratio,omitempty"`
	Verdict Verdict `json:"verdict"`
	// Causes are what usually puts such a row below its figure, what this machine's
	// result itself shows first.
	Causes []string `json:"causes,omitempty"`
}

// Judgement is a key sweep set beside the figures of its machine.
type Judgement struct {
	// GPU, NProc and Link are the measured machine's: the GPU model, the ranks, and
	// the link between rank 0 and rank NProc/2.
	GPU   string `json:"gpu"`
	NProc int    `json:"nproc"`
	Link  string `json:"link,omitempty"`
	// Reference names the machine whose figures the rows were set beside; NoReference
	// says why there were none (the rows are then shown without verdicts).
	Reference   string `json:"reference,omitempty"`
	NoReference string `json:"no_reference,omitempty"`
	// Notes say where the machine differs from the reference's (its link).
	Notes        []string `json:"notes,omitempty"`
	TolerancePct float64  `json:"tolerance_pct"`
	Rows         []Row    `json:"rows"`
	// Below counts the rows more than the tolerance below their figures.
	Below int `json:"below"`
}

// Judge sets res's rows beside t's figures for the machine res was measured on (its
// header: GPU model, ranks, link), and names each row more than tolerancePct below its
// figure, with what usually causes that.
func Judge(res result.Result, t Table, tolerancePct float64) Judgement {
	j := Judgement{NProc: res.Header.NProc, Link: res.Header.Link, TolerancePct: tolerancePct}
	m, evidence := t.machineOf(res.Header, &j)
	for _, r := range res.Rows {
		met := MetricOf(r.Op)
		row := Row{Name: RowName(r), Metric: met.Name, Unit: met.Unit, Measured: met.Of(r), Verdict: NoFigure}
		f, found := m.figure(keyOf(r))
		switch {
		case !r.Trusted():
			row.Verdict = Untrusted
		case found:
			row.Reference, row.Source = f.Value, f.Source
			row.Ratio = result.Round(met.Ratio(row.Measured, f.Value), 4)
			row.Verdict = OK
			if row.Ratio < 1-tolerancePct/100 {
				row.Verdict = Below
				row.Causes = append(slices.Clone(evidence), met.Causes...)
				j.Below++
			}
		}
		j.Rows = append(j.Rows, row)
	}
	return j
}

// RowName names a row as the tables do: op, implementation, size, pair or ranks.
func RowName(r result.Row) string {
	return fmt.Sprintf("%s %s %s %s", r.Op, r.Impl, units.FormatSize(r.Size), r.PairLabel())
}

// figure is m's figure for the row k (none where m is nil).
func (m *Machine) figure(k result.RowKey) (Figure, bool) {
	if m == nil {
		return Figure{}, false
	}
	for _, f := range m.Figures {
		if f.Key() == k {
			return f, true
		}
	}
	return Figure{}, false
}

// machineOf finds the figures for the machine h describes and fills in j's GPU,
// Reference, NoReference and Notes. evidence is what h itself shows that puts rows
// below the figures (a link that differs from the reference's, a pair that NVSHMEM
// reached through its remote transport). A machine of another link is still the
// reference, with the difference named: a link down is what the check is for.
func (t Table) machineOf(h result.Header, j *Judgement) (m *Machine, evidence []string) {
	gpu, why := gpuOf(h.GPUs)
	j.GPU = gpu
	if why != "" {
		j.NoReference = why
		return nil, nil
	}
	var same []*Machine
	for i := range t.Machines {
		if c := &t.Machines[i]; c.GPU == gpu && c.NProc == h.NProc {
			if c.Link == h.Link {
				same = append([]*Machine{c}, same...)
			} else {
				same = append(same, c)
			}
		}
	}
	if len(same) == 0 {
		link := h.Link
		if link == "" {
			link = "(link not known)"
		}
		j.NoReference = fmt.Sprintf("no reference for %s: symmem has figures for %s only", Name(gpu, h.NProc, link), t.Names())
		return nil, nil
	}
	m = same[0]
	j.Reference = m.Name()
	partner := h.NProc / 2
	switch {
	case h.Link == m.Link:
	case h.Link == "":
		j.Notes = append(j.Notes, fmt.Sprintf("the link between rank 0 and rank %d is not known here (NVML did not say); the reference's is %s", partner, m.Link))
	case strings.HasPrefix(h.Link, "NV"):
		e := fmt.Sprintf("the link between rank 0 and rank %d is %s here and %s in the reference: NVLinks are down or not trained (nvidia-smi nvlink --status)", partner, h.Link, m.Link)
		j.Notes, evidence = append(j.Notes, e), append(evidence, e)
	default:
		e := fmt.Sprintf("rank 0 and rank %d are joined by PCIe (%s) here and by %s in the reference: NVLink is not in use between them (nvidia-smi topo -m)", partner, h.Link, m.Link)
		j.Notes, evidence = append(j.Notes, e), append(evidence, e)
	}
	var pairs []string
	for pair, how := range h.Transports {
		if how != "p2p" {
			pairs = append(pairs, fmt.Sprintf("%s (%s)", pair, how))
		}
	}
	sort.Strings(pairs)
	if len(pairs) > 0 {
		e := "NVSHMEM reached " + strings.Join(pairs, ", ") + " through its remote transport, not peer-to-peer: no peer access between those GPUs, or NVSHMEM_DISABLE_P2P=1"
		j.Notes, evidence = append(j.Notes, e), append(evidence, e)
	}
	return m, evidence
}

// gpuOf is the GPU model the ranks ran on, from a result header's GPUs (one a rank,
// "NVIDIA H200 (GPU-c9e997a7-...)"); why, where not "", says why no figures can apply.
func gpuOf(gpus []string) (model, why string) {
	if len(gpus) == 0 {
		return "", "the result names no GPU (the CPU backend, or a file older than GPU names in results)"
	}
	var models []string
	byUUID := map[string]int{}
	for rank, g := range gpus {
		name, uuid, _ := strings.Cut(g, " (")
		uuid = strings.TrimSuffix(uuid, ")")
		if !slices.Contains(models, name) {
			models = append(models, name)
		}
		if uuid == "" {
			continue
		}
		if first, ok := byUUID[uuid]; ok {
			return name, fmt.Sprintf("ranks %d and %d share one GPU (%s): their kernels take turns on it, so their times measure no machine", first, rank, uuid)
		}
		byUUID[uuid] = rank
	}
	if len(models) > 1 {
		return models[0], "the ranks ran on different GPUs (" + strings.Join(models, ", ") + ")"
	}
	return models[0], ""
}
