package ops

// ReduceScatter: Send is Bytes; Recv is Bytes/n, the reduction (--redop) of block me
// of every rank's Send.
const ReduceScatter = "reduce-scatter"

var _ = define(ReduceScatter, def{order: 6, family: FamilyCollective, takes: []Setting{DTypeSetting, RedOpSetting, AlgoSetting}, help: "rank r ends with the reduction (--redop) of block r of every rank's input", split: true, recvShare: true, reduces: true, runs: true,
	bus:   ringShare,
	algos: []string{Staged, Pull},
	deliver: func(in Inputs) ([]byte, error) {
		blocks := make([][]byte, in.Ranks)
		for r := range blocks {
			blocks[r] = in.share(r)
		}
		out := in.out()
		return out, in.Reduce(out, blocks...)
	}})
