// Package coll holds the element arithmetic of reductions (package ops says what each
// operation's sizes and results are, and what each reduction operator is). It also
// makes the data a collective is checked with (small integers, chosen per operator so
// that every result is exact even in bfloat16) and the routing of MoE dispatch and
// combine.
package coll

// Chunk splits count elements into n near-equal parts and returns part i's first
// element and length (two-shot all-reduce's blocks when count is not a multiple of n).
func Chunk(count int64, n, i int) (first, length int64) {
	base, extra := count/int64(n), count%int64(n)
	first = int64(i)*base + min(int64(i), extra)
	length = base
	if int64(i) < extra {
		length++
	}
	return first, length
}
