package gpu

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// How the MoE kernels share a routing's blocks among their grid: the pieces each
// block sums or moves, and where the staged combine keeps its copies.

// combinePieces cuts rank s's output places (combinePlaces) into grid parts of equal
// cost, in order: block b sums pieces out[bounds[b]:bounds[b+1]]. A copy on another
// rank costs remoteCost times a local one: the pull kernel loads it across the link,
// and for the staged one block b of the copy's rank puts it across in the same
// launch. Every rank can cut every rank's places: the staged kernel's puts follow the
// cut of the rank they go to.
func combinePieces(blocks []backend.Block, s, grid int) (bounds []int64, out []moePlace) {
	cost := func(pl moePlace) (int64, int64) {
		w := int64(0)
		for _, cp := range pl.copies {
			if cp.rank == int64(s) {
				w++
			} else {
				w += remoteCost
			}
		}
		return pl.n, w
	}
	part := func(pl moePlace, off, m int64) moePlace {
		q := moePlace{off: pl.off + off, n: m, copies: slices.Clone(pl.copies)}
		for i := range q.copies {
			q.copies[i].off += off
		}
		return q
	}
	return share(combinePlaces(blocks, s), grid, collVector, cost, part)
}

// stagedAt is where the staged combine keeps copy k of piece pc of rank me (a copy
// from another rank) in me's scratch: layer j (the copy is the j-th of the piece's
// copies from other ranks) of Recv-sized layers, at the piece's own offset. Pieces of
// one place keep their place's copies in order, so they agree on j.
func stagedAt(pc moePlace, k, me int, layer int64) int64 {
	j := int64(0)
	for _, cp := range pc.copies[:k] {
		if cp.rank != int64(me) {
			j++
		}
	}
	return j*layer + pc.off
}

// stagedRows are the staged combine's puts of rank me, block by block: block b of me
// puts, into every other rank s's scratch (stagedAt), the copies me holds of the
// pieces block b of s sums (combinePieces of s), so that each block of s waits at its
// barrier only for what it sums. Within a block: to the other ranks from the next one
// on, by place, with puts that continue each other at both ends merged (on two ranks
// nearly every token is in both, in token order, and a place's copy runs on).
func stagedRows(blocks []backend.Block, me, n, grid int, layer int64) (bounds []int64, rows []moeRow) {
	type cut struct {
		bounds []int64
		pieces []moePlace
	}
	cuts := make([]cut, n)
	for s := range n {
		if s != me {
			cuts[s].bounds, cuts[s].pieces = combinePieces(blocks, s, grid)
		}
	}
	bounds = make([]int64, grid+1)
	for b := range grid {
		bounds[b] = int64(len(rows))
		var mine []moeRow
		for s := range n {
			if s == me {
				continue
			}
			cs := cuts[s]
			for _, pc := range cs.pieces[cs.bounds[b]:cs.bounds[b+1]] {
				for k, cp := range pc.copies {
					if cp.rank == int64(me) {
						mine = append(mine, moeRow{cp.off, stagedAt(pc, k, s, layer), int64(s), pc.n})
					}
				}
			}
		}
		rows = append(rows, mergeRows(mine, me, n)...)
	}
	bounds[grid] = int64(len(rows))
	return bounds, rows
}

// checkMoE refuses blocks that do not fit the buffers, that land on the same bytes of a
// rank (dispatch: the GPU's copies would race, where the CPU backend lets the later one
// win) or that split elements (combine). Every rank holds the same list and refuses
// alike.
func checkMoE(c backend.Collective, n int, elem int64) error {
	for i, k := range c.Blocks {
		switch {
		case k.Src < 0 || k.Src >= n || k.Dst < 0 || k.Dst >= n:
			return fmt.Errorf("%s block %d goes from rank %d to %d: the job has ranks 0..%d", c.Op, i, k.Src, k.Dst, n-1)
		case k.SrcOff < 0 || k.DstOff < 0 || k.Bytes < 0 || k.SrcOff+k.Bytes > c.Send.Size || k.DstOff+k.Bytes > c.Recv.Size:
			return fmt.Errorf("%s block %d->%d (%d bytes at %d, to %d) does not fit the %d-byte send and %d-byte receive buffers",
				c.Op, k.Src, k.Dst, k.Bytes, k.SrcOff, k.DstOff, c.Send.Size, c.Recv.Size)
		case k.SrcOff%elem != 0 || k.DstOff%elem != 0 || k.Bytes%elem != 0:
			return fmt.Errorf("%s block %d->%d (%d bytes at %d, to %d) splits %d-byte elements of %s", c.Op, k.Src, k.Dst, k.Bytes, k.SrcOff, k.DstOff, elem, c.DType)
		}
	}
	if c.Op != ops.Dispatch {
		return nil
	}
	order := make([]int, 0, len(c.Blocks))
	for i, k := range c.Blocks {
		if k.Bytes > 0 {
			order = append(order, i)
		}
	}
	at := func(i int) backend.Block { return c.Blocks[i] }
	slices.SortFunc(order, func(i, j int) int {
		return cmp.Or(cmp.Compare(at(i).Dst, at(j).Dst), cmp.Compare(at(i).DstOff, at(j).DstOff))
	})
	for x := 1; x < len(order); x++ {
		p, k := at(order[x-1]), at(order[x])
		if p.Dst == k.Dst && p.DstOff+p.Bytes > k.DstOff {
			return fmt.Errorf("dispatch blocks %d and %d both land on bytes %d..%d of rank %d's receive buffer: give every copy a place of its own",
				order[x-1], order[x], k.DstOff, min(p.DstOff+p.Bytes, k.DstOff+k.Bytes), k.Dst)
		}
	}
	return nil
}

// moeRow is a row of dispatch's table: n bytes from send + src here to recv + dst on
// rank.
type moeRow struct{ src, dst, rank, n int64 }

// dispatchRows are rank me's puts: to the other ranks first, from the next one on, then
// to itself; by place, with transfers that continue each other at both ends merged
// (with top-8 routing on two ranks nearly every token goes to both, in token order).
func dispatchRows(blocks []backend.Block, me, n int) []moeRow {
	var rows []moeRow
	for _, k := range blocks {
		if k.Src == me && k.Bytes > 0 {
			rows = append(rows, moeRow{k.SrcOff, k.DstOff, int64(k.Dst), k.Bytes})
		}
	}
	return mergeRows(rows, me, n)
}

// mergeRows orders rank me's puts by destination, from the next rank on (me last), then
// by place, and merges those that continue the one before at both ends.
func mergeRows(rows []moeRow, me, n int) []moeRow {
	turn := func(r moeRow) int64 { return (r.rank - int64(me) - 1 + int64(n)) % int64(n) }
	slices.SortStableFunc(rows, func(a, b moeRow) int { return cmp.Or(cmp.Compare(turn(a), turn(b)), cmp.Compare(a.dst, b.dst)) })
	var out []moeRow
	for _, r := range rows {
		if last := len(out) - 1; last >= 0 && out[last].rank == r.rank && out[last].dst+out[last].n == r.dst && out[last].src+out[last].n == r.src {
			out[last].n += r.n
			continue
		}
		out = append(out, r)
	}
	return out
}

// moePlace is n bytes of rank me's output at recv + off, the sum of its copies in order.
type moePlace struct {
	off, n int64
	copies []moeCopy
}

// moeCopy is a copy combine reads: at send + off on rank.
type moeCopy struct{ rank, off int64 }

// combinePlaces are rank me's output places: the bytes the blocks landing on it cover,
// cut where any of them starts or ends, each with the copies covering it in the blocks'
// order (the order the CPU backend adds them in); neighbours whose copies continue each
// other are merged.
func combinePlaces(blocks []backend.Block, me int) []moePlace {
	var cuts []int64
	for _, k := range blocks {
		if k.Dst == me && k.Bytes > 0 {
			cuts = append(cuts, k.DstOff, k.DstOff+k.Bytes)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	covers := make([][]moeCopy, max(len(cuts)-1, 0))
	for _, k := range blocks {
		if k.Dst != me || k.Bytes == 0 {
			continue
		}
		i, _ := slices.BinarySearch(cuts, k.DstOff)
		for ; cuts[i] < k.DstOff+k.Bytes; i++ {
			covers[i] = append(covers[i], moeCopy{int64(k.Src), k.SrcOff + cuts[i] - k.DstOff})
		}
	}
	var out []moePlace
	for i, cs := range covers {
		if len(cs) == 0 {
			continue
		}
		p := moePlace{cuts[i], cuts[i+1] - cuts[i], cs}
		if last := len(out) - 1; last >= 0 && continues(out[last], p) {
			out[last].n += p.n
			continue
		}
		out = append(out, p)
	}
	return out
}

// continues says whether place p starts where a ends and each of its copies where a's
// copy in the same position ends, on the same rank.
func continues(a, p moePlace) bool {
	if a.off+a.n != p.off || len(a.copies) != len(p.copies) {
		return false
	}
	for i, c := range a.copies {
		if c.rank != p.copies[i].rank || c.off+a.n != p.copies[i].off {
			return false
		}
	}
	return true
}

// share cuts items into blocks parts of about equal cost (bytes times weight, from
// size), in order, splitting an item at multiples of align bytes from its start
// (piece makes the part of an item from off, m bytes long). Part b is
// out[bounds[b]:bounds[b+1]].
func share[T any](items []T, blocks int, align int64, size func(T) (n, weight int64), piece func(it T, off, m int64) T) (bounds []int64, out []T) {
	var total int64
	for _, it := range items {
		n, w := size(it)
		total += n * w
	}
	bounds = make([]int64, blocks+1)
	b, spent := 0, int64(0)
	for _, it := range items {
		n, w := size(it)
		for off := int64(0); off < n; {
			m := n - off
			if b < blocks-1 {
				room := total*int64(b+1)/int64(blocks) - spent
				if room <= 0 {
					b++
					bounds[b] = int64(len(out))
					continue
				}
				m = min(m, backend.Align((room+w-1)/w, align))
			}
			out = append(out, piece(it, off, m))
			off += m
			spent += m * w
		}
	}
	for b++; b <= blocks; b++ {
		bounds[b] = int64(len(out))
	}
	return bounds, out
}
