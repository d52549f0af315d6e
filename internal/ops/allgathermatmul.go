package ops

// AllGatherMatmul: C = all_gather(A) @ B, as torch's fused_all_gather_matmul: each
// rank holds M/n rows of A (its shard) and the whole B; every rank ends with all of
// C (M x N).
const AllGatherMatmul = "all-gather-matmul"

var _ = define(AllGatherMatmul, def{order: 17, family: FamilyFused, runs: true, extra: true, named: true,
	takes:   []Setting{DTypeSetting, MatmulSetting},
	fused:   &fusedDef{gathers: true},
	help:    "C = all_gather(A) @ B: rank r holds rows r*M/n.. of A and all of B; every rank ends with C (--m --n --k)",
	title:   "all-gather-matmul (C = all_gather(A) @ B; time: mean over ranks)",
	deliver: noDelivery})
