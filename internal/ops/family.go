package ops

import "slices"

// Family is the engine an operation runs on. The run tests, bench and the result
// tables each keep one implementation per family and look it up once; everything else
// they need of an operation they ask the operation itself: its shape (Shape), what a
// rank must hold (Deliver), its bus factor, the settings it reads (Takes), its element
// types, variants, title and help. An operation of an existing family is one file of
// this package and its backends' implementations, nothing in the layers above.
type Family int

const (
	// FamilyPut pushes a rank's source into a peer's destination; the peer checks it
	// after a barrier.
	FamilyPut Family = iota
	// FamilyGet pulls a peer's source into the initiator's destination.
	FamilyGet
	// FamilyPutSignal pushes and then advances a signal the receiver waits on.
	FamilyPutSignal
	// FamilyPutFlag pushes, orders (a variant: fence or quiet) and puts a flag the
	// receiver waits on before it reads the data.
	FamilyPutFlag
	// FamilySignal moves a signal word alone.
	FamilySignal
	// FamilyLatency is a timed round trip of a put with signal between two ranks.
	FamilyLatency
	// FamilyCollective is every rank taking part with the same share, its data
	// shaped by Shape and its result by Deliver: the engine never asks which
	// collective it runs.
	FamilyCollective
	// FamilyRouted moves a MoE layer's routing of tokens between every rank (a list
	// of blocks, each rank its own amount).
	FamilyRouted
	// FamilyMeeting is every rank meeting, with no payload (barrier).
	FamilyMeeting
	// FamilyGetAdd pulls a peer's source and adds it to the initiator's own into its
	// destination (get-add).
	FamilyGetAdd
	// FamilyFused is a matrix product fused with a collective (all-gather-matmul,
	// matmul-reduce-scatter): its shape is a Matmul, its result Product.
	FamilyFused
)

// Family is the engine o runs on.
func (o Op) Family() Family { return o.def().family }

// Setting is a setting that some operations read beside their size, declared by each
// operation's file (def.takes): the commands offer and check it for those alone.
type Setting string

const (
	// DTypeSetting is the element type the data is carried and combined in (the
	// collectives'; a point operation moves bytes).
	DTypeSetting Setting = "dtype"
	// RedOpSetting is the reduction operator it combines under.
	RedOpSetting Setting = "redop"
	// RootSetting is the rank whose data is spread, or which gathers.
	RootSetting Setting = "root"
	// AlgoSetting is the algorithm or variant it runs.
	AlgoSetting Setting = "algo"
	// MoESetting is the MoE layer that routes its tokens (tokens, hidden, top-k,
	// experts, seed).
	MoESetting Setting = "moe"
	// MatmulSetting is the matrix product's shape (M, N, K).
	MatmulSetting Setting = "matmul"
)

// Takes says whether o reads setting s.
func (o Op) Takes(s Setting) bool { return slices.Contains(o.def().takes, s) }

// Taking lists the operations that read setting s, in table order.
func Taking(s Setting) []Op {
	var out []Op
	for _, o := range All() {
		if o.Takes(s) {
			out = append(out, o)
		}
	}
	return out
}

// AnyTakes says whether any of names reads setting s.
func AnyTakes(names []string, s Setting) bool {
	return slices.ContainsFunc(names, func(n string) bool { return Op(n).Takes(s) })
}

// Help is o's line in `symmem run --help` and `bench --help`.
func (o Op) Help() string { return o.def().help }
