package gpu

import (
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// The collective kernels' sync area past the heap: where each kernel's staging
// areas lie, how large they are, and which collectives fit them.

// syncArea is the size of the collective kernels' symmetric area past the heap for
// size ranks: the barrier words (a row of pad words per block, one state word per
// block, one LL launch word per block), then the staging areas of the push all-reduce
// (pushArea), the LL all-reduce (llArea), push_ll (llPushArea) and the LL128
// all-reduce (ll128Area).
func syncArea(size int) int64 {
	return backend.Align(userFlagOff(size)+8*maxFlagLanes, backend.HeapAlign)
}

// userFlagOff is where, past the user kernels' signal words, the words a user's
// put-flag kernel puts its flag from lie: one per lane (maxFlagLanes), so that flags
// in flight on two lanes do not share a source.
func userFlagOff(size int) int64 { return userSigOff(size) + userSigArea(size) }

// maxFlagLanes bounds the lanes a user's put-flag runs on (bench's --overlap takes 8).
const maxFlagLanes = 64

// llAreaOff is where the LL all-reduce's areas start in the sync area, past the push
// all-reduce's.
func llAreaOff(size int) int64 {
	return backend.Align(pushAreaOff(size)+pushArea(size), 256)
}

// llArea is the size of the LL all-reduce's areas.
func llArea(size int) int64 { return stagingArea(size, llBlocks, llWords*8) }

// stagingArea is the size of areas of 2 halves (launches alternate them) of size slots
// of slot bytes for each of blocks blocks; none past pushRanks.
func stagingArea(size int, blocks, slot int64) int64 {
	if size > pushRanks {
		return 0
	}
	return blocks * 2 * int64(size) * slot
}

// llPushAreaOff is where push_ll's areas start in the sync area, past reduce_ll's.
func llPushAreaOff(size int) int64 {
	return backend.Align(llAreaOff(size)+llArea(size), 256)
}

// llPushArea is the size of push_ll's areas.
func llPushArea(size int) int64 { return stagingArea(size, MaxCollBlocks, llPushWords*8) }

// ll128Budget is the bytes of a rank's LL128 areas (a variable only so that the fake
// GPU's tests, which clear every area of every rank they open, can take less).
var ll128Budget int64 = 36 << 20

// ll128Auto is the largest all-reduce that runs LL128 where no one asked for it (a
// variable only so that the fake GPU's tests can choose sizes by it): 0, none, until it
// has been timed against the push and two-shot kernels on two GPUs.
var ll128Auto int64 = 0

// ll128AreaOff is where the LL128 all-reduce's areas start in the sync area, past
// push_ll's.
func ll128AreaOff(size int) int64 {
	return backend.Align(llPushAreaOff(size)+llPushArea(size), 256)
}

// ll128Area is the size of the LL128 all-reduce's areas: 2 halves of size-1 slots
// per block.
func ll128Area(size int) int64 { return MaxCollBlocks * 2 * int64(size-1) * ll128Cap(size) }

// ll128Cap is the size of one slot of the LL128 areas on size ranks: whole lines (0
// on one rank and past pushRanks).
func ll128Cap(size int) int64 {
	if size < 2 || size > pushRanks {
		return 0
	}
	return ll128Budget / (MaxCollBlocks * 2 * int64(size-1)) / ll128Line * ll128Line
}

// ll128Lines is how many lines carry nbytes in LL128 form.
func ll128Lines(nbytes int64) int64 { return (nbytes + ll128Data - 1) / ll128Data }

// ll128Mode is what EnvLL128 says: ll128Default (unset: by size), ll128Off or ll128On.
type ll128Mode int

const (
	ll128Default ll128Mode = iota
	ll128Off
	ll128On
)

// parseLL128 reads EnvLL128's value.
func parseLL128(v string) (ll128Mode, error) {
	switch v {
	case "":
		return ll128Default, nil
	case "0":
		return ll128Off, nil
	case "1":
		return ll128On, nil
	}
	return 0, fmt.Errorf("%s=%q: want 0 (LL128 off), 1 (LL128 wherever it fits) or nothing (by size)", EnvLL128, v)
}

// ll128Fits says whether the LL128 all-reduce can run c on size ranks: bf16 or
// float32 in whole 8-byte words, within the areas' lines, no --blocks, and LL on.
func (b *Backend) ll128Fits(c backend.Collective, size int, l backend.Launch) bool {
	ok := ops.Canonical(c.DType) == "bf16" || ops.Canonical(c.DType) == "float32"
	return b.ll && b.ll128 != ll128Off && ok && c.Op == ops.AllReduce && ll128Area(size) > 0 && c.Bytes > 0 &&
		c.Bytes%8 == 0 && ll128Lines(c.Bytes) <= MaxCollBlocks*(ll128Cap(size)/ll128Line) && l.Blocks == 0
}

// ll128Use says whether a one-shot all-reduce of c runs the LL128 kernel: where it
// fits, above the LL kernel's sizes up to ll128Auto where every rank's GPU has NVLink,
// or at every size with EnvLL128=1. The NVLink probe (NVML and a round of the job's
// store) runs the first time a size asks for it, not at every job's start: every rank
// reaches that point in the same collective, so they agree.
func (b *Backend) ll128Use(c backend.Collective, l backend.Launch) (bool, error) {
	if !b.ll128Fits(c, b.size, l) {
		return false, nil
	}
	if b.ll128 == ll128On {
		return true, nil
	}
	if (c.Bytes <= llAuto && b.llFits(c, b.size)) || c.Bytes > ll128Auto {
		return false, nil
	}
	if b.probeLinks != nil {
		b.nvlink, b.probeErr = b.probeLinks()
		b.probeLinks = nil
	}
	return b.nvlink && b.probeErr == nil, b.probeErr
}

// ll128Grid splits lines over the LL128 kernel's blocks: at least ll128MinLines a
// block, at most MaxCollBlocks blocks; every rank computes the same.
func ll128Grid(lines int64) (blocks int, chunk int64) {
	n := min(max((lines+ll128MinLines-1)/ll128MinLines, 1), MaxCollBlocks)
	chunk = (lines + n - 1) / n
	return int((lines + chunk - 1) / chunk), chunk
}

// llPushFits says whether push_ll moves nbytes to each peer: whole 32-bit words, up
// to llPushMax, no --blocks, and LL not turned off.
func (b *Backend) llPushFits(nbytes int64, l backend.Launch) bool {
	return b.ll && llPushArea(b.size) > 0 && nbytes > 0 && nbytes%4 == 0 && nbytes <= llPushMax && l.Blocks == 0
}

// llFits says whether the LL all-reduce can run c on size ranks: whole 32-bit words,
// within llBlocks blocks, and not turned off.
func (b *Backend) llFits(c backend.Collective, size int) bool {
	ok := ops.Canonical(c.DType) == "bf16" || ops.Canonical(c.DType) == "float32"
	return b.ll && ok && c.Op == ops.AllReduce && llArea(size) > 0 && c.Bytes%4 == 0 && c.Bytes <= llBlocks*llWords*4
}

// pushAreaOff is where the push all-reduce's staging areas start in the sync area.
func pushAreaOff(size int) int64 {
	return backend.Align(MaxCollBlocks*int64(size)*8+2*MaxCollBlocks*8, 256)
}

// pushArea is the size of the push all-reduce's staging areas.
func pushArea(size int) int64 { return stagingArea(size, pushBlocks, pushCap(size)) }

// pushCap is the size of one slot of the push all-reduce's staging areas on size ranks
// (whole pages; 0 past pushRanks).
func pushCap(size int) int64 {
	if size > pushRanks {
		return 0
	}
	return pushBudget / (pushBlocks * 2 * int64(size)) / 4096 * 4096
}

// pushFits says whether the push kernel (reduce_push) can run c on size ranks: an
// all-reduce or reduce-scatter whose part a rank puts to each peer (pushBytes) fits the
// staging slots in whole elements.
func pushFits(c backend.Collective, size int) bool {
	elem := ops.ElemSize(c.DType)
	ok := ops.Canonical(c.DType) == "bf16" || ops.Canonical(c.DType) == "float32"
	per := pushBytes(c, size)
	return ok && per > 0 && pushArea(size) > 0 && per <= pushBlocks*pushCap(size) && per%elem == 0
}

// pushBytes is what the push kernel puts from each rank to each peer for c: the whole
// input of an all-reduce, a block of a reduce-scatter's (0: it does not run c).
func pushBytes(c backend.Collective, size int) int64 {
	switch c.Op {
	case ops.AllReduce:
		return c.Bytes
	case ops.ReduceScatter:
		return c.Bytes / int64(size)
	}
	return 0
}
