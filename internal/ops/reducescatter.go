package ops

// ReduceScatter: Send is Bytes; Recv is Bytes/n, the sum of block me of every rank's Send.
const ReduceScatter = "reduce-scatter"

var _ = define(ReduceScatter, def{order: 6, kind: Collective, split: true, recvShare: true, sums: true, runs: true,
	bus:   ringShare,
	algos: []string{Staged, Pull},
	deliver: func(in Inputs) ([]byte, error) {
		blocks := make([][]byte, in.Ranks)
		for r := range blocks {
			blocks[r] = in.share(r)
		}
		out := in.out()
		return out, in.Sum(out, blocks...)
	}})
