package ops

// AllToAll: Send and Recv are Bytes; block p of Recv is block me of rank p's Send.
const AllToAll = "all-to-all"

var _ = define(AllToAll, def{order: 8, family: FamilyCollective, takes: []Setting{DTypeSetting}, help: "rank r ends with block r of every rank's input, in rank order", split: true, runs: true,
	bus: ringShare,
	deliver: func(in Inputs) ([]byte, error) {
		out := in.out()
		for r := 0; r < in.Ranks; r++ {
			copy(out[int64(r)*in.Block:], in.share(r))
		}
		return out, nil
	}})
