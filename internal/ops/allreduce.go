package ops

// AllReduce: Send and Recv are Bytes each; Recv is the reduction (--redop) of every
// rank's Send.
const AllReduce = "all-reduce"

var _ = define(AllReduce, def{order: 4, family: FamilyCollective, reduces: true, takes: []Setting{DTypeSetting, RedOpSetting, AlgoSetting}, help: "every rank ends with the reduction (--redop) of every rank's input", runs: true,
	bus:   func(n int) float64 { return 2 * ringShare(n) },
	algos: []string{OneShot, TwoShot},
	deliver: func(in Inputs) ([]byte, error) {
		all := make([][]byte, in.Ranks)
		for r := range all {
			all[r] = in.In(r)
		}
		out := in.out()
		return out, in.Reduce(out, all...)
	}})
