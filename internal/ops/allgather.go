package ops

// AllGather: Send is Bytes/n; Recv is Bytes, its block r rank r's Send.
const AllGather = "all-gather"

var _ = define(AllGather, def{order: 5, family: FamilyCollective, takes: []Setting{DTypeSetting}, help: "every rank ends with every rank's block, in rank order", split: true, sendShare: true, runs: true,
	bus: ringShare,
	deliver: func(in Inputs) ([]byte, error) {
		out := in.out()
		for r := 0; r < in.Ranks; r++ {
			copy(out[int64(r)*in.Block:], in.In(r)[:in.Block])
		}
		return out, nil
	}})
