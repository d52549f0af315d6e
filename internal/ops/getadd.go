package ops

// GetAdd: the receiving rank fetches its peer's Send and adds it, element by element
// in the element type, to its own Send, into its Recv: out = local + remote, as the
// fused get-add kernel of PyTorch's SHMEM tests computes it.
const GetAdd = "get-add"

// DefaultAddDType is what get-add adds in unless --dtype says otherwise: a type that
// sums (int8 does not). A user's get-add kernel of it is declared under the key get-add
// alone (pkg/kernels).
const DefaultAddDType = "float32"

var _ = define(GetAdd, def{order: 19, family: FamilyGetAdd, pulls: true, sums: true, runs: true, extra: true,
	takes: []Setting{DTypeSetting},
	help:  "rank r gets a peer's buffer and adds its own to it: out = local + remote (pair: rank 0 from --peer; ring: from r+1)",
	deliver: func(in Inputs) ([]byte, error) {
		out := in.out()
		return out, in.Reduce(out, in.In(in.Me), in.In(in.Root))
	}})
