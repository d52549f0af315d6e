// Package coll holds the element arithmetic of sums (package op says what each
// operation's sizes and results are). It also makes the data a collective is
// checked with (small integers, so sums are exact even in bfloat16) and the routing of
// MoE dispatch and combine.
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
