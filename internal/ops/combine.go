package ops

// Combine is MoE's all-to-all-v back: as Dispatch, but the blocks that land on the
// same place (a token's copies) are summed.
const Combine = "combine"

var _ = define(Combine, def{order: 10, family: FamilyRouted, tokens: true, takes: []Setting{DTypeSetting, AlgoSetting, MoESetting}, help: "the experts' outputs sent back to each token's rank and summed there", routed: true, reduces: true, runs: true,
	algos:   []string{Staged, Pull},
	deliver: func(in Inputs) ([]byte, error) { return gather(in, true) }})
