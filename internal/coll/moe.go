package coll

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
)

// MoE is the shape of a mixture-of-experts layer's all-to-all: every rank holds Tokens
// tokens of Hidden elements and routes each to its TopK experts (of Experts, spread
// evenly over the ranks). Dispatch sends a token once to every rank that hosts one of
// its experts, as DeepEP does; combine sends each copy back and sums the copies.
type MoE struct {
	Tokens  int     `json:"tokens"`
	Hidden  int     `json:"hidden"`
	TopK    int     `json:"topk"`
	Experts int     `json:"experts"`
	Seed    uint64  `json:"seed"`
	Skew    float64 `json:"skew,omitempty"` // 0: uniform; s > 0: expert e drawn with weight 1/(e+1)^s
}

// Bounds of a layer: well beyond today's MoE models (DeepSeek-V3: 4096 tokens per rank
// in a batch, hidden 7168, 256 experts), and small enough that routing and checking
// take seconds, not hours.
const (
	MaxTokens  = 1 << 16
	MaxHidden  = 1 << 16
	MaxExperts = 1 << 14
)

// DefaultMoE is a DeepSeek-V3-like layer.
var DefaultMoE = MoE{Tokens: 4096, Hidden: 7168, TopK: 8, Experts: 256, Seed: 1}

// Validate checks the shape for n ranks.
func (m MoE) Validate(n int) error {
	switch {
	case m.Tokens < 1 || m.Tokens > MaxTokens:
		return setting.Errorf("%s %d: give 1..%d tokens per rank", setting.Tokens, m.Tokens, MaxTokens)
	case m.Hidden < 1 || m.Hidden > MaxHidden:
		return setting.Errorf("%s %d: give 1..%d elements per token", setting.Hidden, m.Hidden, MaxHidden)
	case m.Experts > MaxExperts:
		return setting.Errorf("%s %d: give at most %d", setting.Experts, m.Experts, MaxExperts)
	case m.Experts < n:
		return setting.Errorf("%s %d: need at least one expert per rank (%d ranks)", setting.Experts, m.Experts, n)
	case m.TopK < 1 || m.TopK > m.Experts:
		return setting.Errorf("%s %d: give 1..%d (%s)", setting.TopK, m.TopK, m.Experts, setting.Experts)
	case m.Skew < 0 || m.Skew > 8 || math.IsNaN(m.Skew):
		return setting.Errorf("%s %g: give 0 (uniform) up to 8", setting.Skew, m.Skew)
	}
	return nil
}

// Routing is where every token of every rank goes, the same on every rank.
type Routing struct {
	MoE
	Ranks int
	Token int64 // bytes per token
	// Dests[s][t] lists the ranks token t of rank s goes to, ascending.
	Dests [][][]int
	// Slots[d] is how many token copies rank d receives.
	Slots []int
	// Dispatch and Combine are every transfer of the job (Combine's blocks landing on
	// the same token are summed).
	Dispatch, Combine []ops.Block
}

// Route draws the routing for n ranks with elem-byte elements.
// The same routing is asked for by planning, the heap's sizing and every rank's run:
// drawn once per process (a routing is never changed after Route).
var (
	routesMu sync.Mutex
	routes   = map[routeKey]*Routing{}
)

type routeKey struct {
	m    MoE
	n    int
	elem int64
}

func (m MoE) Route(n int, elem int64) (*Routing, error) {
	if err := m.Validate(n); err != nil {
		return nil, err
	}
	routesMu.Lock()
	defer routesMu.Unlock()
	if rt, ok := routes[routeKey{m, n, elem}]; ok {
		return rt, nil
	}
	rt := m.route(n, elem)
	routes[routeKey{m, n, elem}] = rt
	return rt, nil
}

func (m MoE) route(n int, elem int64) *Routing {
	rt := &Routing{MoE: m, Ranks: n, Token: int64(m.Hidden) * elem, Slots: make([]int, n)}
	weights := make([]float64, m.Experts)
	for e := range weights {
		weights[e] = 1
		if m.Skew > 0 {
			weights[e] = 1 / math.Pow(float64(e+1), m.Skew)
		}
	}
	pk := newPicker(weights)
	home := func(e int) int { return e * n / m.Experts }
	rt.Dests = make([][][]int, n)
	for s := 0; s < n; s++ {
		rng := rand.New(rand.NewPCG(m.Seed, uint64(s)))
		rt.Dests[s] = make([][]int, m.Tokens)
		for t := range rt.Dests[s] {
			var dests []int
			for _, e := range pk.pick(rng, m.TopK) {
				if d := home(e); !slices.Contains(dests, d) {
					dests = append(dests, d)
				}
			}
			slices.Sort(dests)
			rt.Dests[s][t] = dests
		}
	}
	// Rank d's receive buffer holds the copies it gets ordered by source rank, then
	// token: slot numbers are assigned in that order.
	copies := 0
	for _, ts := range rt.Dests {
		for _, dests := range ts {
			copies += len(dests)
		}
	}
	rt.Dispatch, rt.Combine = make([]ops.Block, 0, copies), make([]ops.Block, 0, copies)
	for s := 0; s < n; s++ {
		for t, dests := range rt.Dests[s] {
			for _, d := range dests {
				slot := int64(rt.Slots[d])
				rt.Slots[d]++
				rt.Dispatch = append(rt.Dispatch, ops.Block{Src: s, Dst: d, SrcOff: int64(t) * rt.Token, DstOff: slot * rt.Token, Bytes: rt.Token})
				rt.Combine = append(rt.Combine, ops.Block{Src: d, Dst: s, SrcOff: slot * rt.Token, DstOff: int64(t) * rt.Token, Bytes: rt.Token})
			}
		}
	}
	return rt
}

// picker draws experts by weight; its tables are made once per routing.
type picker struct {
	weights, cum []float64
	total        float64
	taken        []bool
	out          []int
}

func newPicker(weights []float64) *picker {
	p := &picker{weights: weights, cum: make([]float64, len(weights)), taken: make([]bool, len(weights))}
	for i, w := range weights {
		p.total += w
		p.cum[i] = p.total
	}
	return p
}

// pick draws k distinct experts: a draw by binary search on the cumulative weights,
// drawn again when the expert is taken already; when the draws keep landing on taken
// experts (k near their number, or a steep skew), one draw among the rest. The result
// is valid until the next pick.
func (p *picker) pick(rng *rand.Rand, k int) []int {
	p.out = p.out[:0]
	if k == len(p.weights) {
		for i := range p.weights {
			p.out = append(p.out, i)
		}
		return p.out
	}
	for len(p.out) < k {
		e := -1
		for try := 0; try < 32 && e < 0; try++ {
			x := rng.Float64() * p.total
			i := min(sort.SearchFloat64s(p.cum, x), len(p.cum)-1)
			if !p.taken[i] {
				e = i
			}
		}
		if e < 0 {
			rest := 0.0
			for i, w := range p.weights {
				if !p.taken[i] {
					rest += w
				}
			}
			x := rng.Float64() * rest
			for i, w := range p.weights {
				if p.taken[i] {
					continue
				}
				e = i
				if x -= w; x < 0 {
					break
				}
			}
		}
		p.taken[e] = true
		p.out = append(p.out, e)
	}
	for _, e := range p.out {
		p.taken[e] = false
	}
	return p.out
}

// Bytes is one rank's token buffer: what dispatch sends and combine returns.
func (rt *Routing) Bytes() int64 { return int64(rt.Tokens) * rt.Token }

// MaxSlots is the largest receive buffer of any rank, in bytes.
func (rt *Routing) MaxSlots() int64 { return int64(slices.Max(rt.Slots)) * rt.Token }

// Crossed is the bytes the blocks move between different ranks, per rank on average.
func Crossed(blocks []ops.Block, n int) int64 {
	var c int64
	for _, b := range blocks {
		if b.Src != b.Dst {
			c += b.Bytes
		}
	}
	return c / int64(n)
}

// Transfers is what the all-to-all-v o (dispatch or combine) of the routing moves: its
// blocks, and the bytes rank r sends and receives. Dispatch sends every token to the
// ranks of its experts; combine, the one that sums, sends the copies back.
func (rt *Routing) Transfers(o ops.Op) (blocks []ops.Block, send, recv func(r int) int64) {
	tokens := func(int) int64 { return rt.Bytes() }
	copies := func(r int) int64 { return int64(rt.Slots[r]) * rt.Token }
	if o.Reduces() {
		return rt.Combine, copies, tokens
	}
	return rt.Dispatch, tokens, copies
}

// Holds says what rank r holds after the all-to-all-v o of the routing, for its check
// line.
func (rt *Routing) Holds(o ops.Op, r int) string {
	if o.Reduces() {
		return fmt.Sprintf("%d tokens, each the sum of its copies", rt.Tokens)
	}
	return fmt.Sprintf("%d token copies", rt.Slots[r])
}
