package ops

// Combine is MoE's all-to-all-v back: as Dispatch, but the blocks that land on the
// same place (a token's copies) are summed.
const Combine = "combine"

var _ = define(Combine, def{order: 10, kind: AllToAllV, tokens: true, routed: true, reduces: true, runs: true,
	algos:   []string{Staged, Pull},
	deliver: func(in Inputs) ([]byte, error) { return gather(in, true) }})
