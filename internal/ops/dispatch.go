package ops

// Dispatch is MoE's all-to-all-v out: each block moves Bytes from rank Src's Send at
// SrcOff to rank Dst's Recv at DstOff (a token to every rank hosting one of its
// experts). Its bus factor is 1: bench counts the bytes that crossed instead.
const Dispatch = "dispatch"

var _ = define(Dispatch, def{order: 9, family: FamilyRouted, tokens: true, takes: []Setting{DTypeSetting, MoESetting}, help: "a MoE layer's tokens sent to the ranks of their top-k experts (--tokens, --hidden, --topk, --experts)", routed: true, runs: true,
	deliver: func(in Inputs) ([]byte, error) { return gather(in, false) }})

// gather lands the blocks destined for in.Me, summing those that land on the same
// bytes where sum is set.
func gather(in Inputs, sum bool) ([]byte, error) {
	out := in.out()
	if sum { // every block's place starts from zero: the sum is of the copies alone
		for _, b := range in.Blocks {
			if b.Dst == in.Me {
				clear(out[b.DstOff : b.DstOff+b.Bytes])
			}
		}
	}
	for _, b := range in.Blocks {
		if b.Dst != in.Me {
			continue
		}
		src := in.In(b.Src)[b.SrcOff : b.SrcOff+b.Bytes]
		dst := out[b.DstOff : b.DstOff+b.Bytes]
		if !sum {
			copy(dst, src)
		} else if err := in.Reduce(dst, dst, src); err != nil {
			return nil, err
		}
	}
	return out, nil
}
