package ops

// Scatter: Send is Bytes; Recv is Bytes/n, block me of the root's Send (on the root
// too): reduce-scatter's shape, with the root's input alone and nothing combined.
const Scatter = "scatter"

var _ = define(Scatter, def{order: 16, family: FamilyCollective, split: true, recvShare: true, rooted: true, runs: true, takes: []Setting{DTypeSetting, RootSetting},
	help: "rank r ends with block r of rank --root's input",
	bus:  ringShare,
	deliver: func(in Inputs) ([]byte, error) {
		out := in.out()
		copy(out, in.share(in.Root))
		return out, nil
	}})
