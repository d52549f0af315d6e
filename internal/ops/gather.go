package ops

// Gather: Send is Bytes/n; the root's Recv is Bytes, its block r rank r's Send, what
// all-gather leaves on every rank. The other ranks hold nothing of it, as for reduce.
const Gather = "gather"

var _ = define(Gather, def{order: 15, family: FamilyCollective, split: true, sendShare: true, rooted: true, runs: true, takes: []Setting{DTypeSetting, RootSetting},
	help: "rank --root ends with every rank's block, in rank order; the others' outputs are left as they were",
	bus:  ringShare,
	deliver: func(in Inputs) ([]byte, error) {
		if in.Me != in.Root {
			return nil, nil
		}
		return Op(AllGather).Deliver(in)
	}})
