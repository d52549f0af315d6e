package ops

// MatmulReduceScatter: C = reduce_scatter(A @ B) scattered by rows, as torch's
// fused_matmul_reduce_scatter with scatter_dim 0: each rank holds its own A (M x K)
// and B (K x N); rank r ends with rows r*M/n.. of the sum over ranks of A @ B.
const MatmulReduceScatter = "matmul-reduce-scatter"

var _ = define(MatmulReduceScatter, def{order: 18, family: FamilyFused, runs: true, extra: true, named: true,
	takes:   []Setting{DTypeSetting, MatmulSetting},
	fused:   &fusedDef{},
	help:    "C = reduce_scatter(A @ B) by rows: every rank's own A and B; rank r ends with rows r*M/n.. of the sum",
	title:   "matmul-reduce-scatter (C = reduce_scatter(A @ B), rows; time: mean over ranks)",
	deliver: noDelivery})
