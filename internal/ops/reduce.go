package ops

// Reduce: Send and Recv are Bytes each; the root's Recv is the reduction (--redop) of
// every rank's Send, what all-reduce leaves on every rank. The other ranks hold
// nothing of it: NCCL leaves their Recv as it was, and so does every implementation.
const Reduce = "reduce"

var _ = define(Reduce, def{order: 14, family: FamilyCollective, reduces: true, rooted: true, runs: true, takes: []Setting{DTypeSetting, RedOpSetting, RootSetting},
	help: "rank --root ends with the reduction (--redop) of every rank's input; the others' outputs are left as they were",
	deliver: func(in Inputs) ([]byte, error) {
		if in.Me != in.Root {
			return nil, nil
		}
		return Op(AllReduce).Deliver(in)
	}})
