package bench

import (
	"encoding/binary"
	"strings"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
)

// tune tries launch shapes with one short repetition each and returns the fastest,
// and the wrong bytes this rank found in the trials: each is checked like any
// measurement, and a shape that delivered wrong bytes fails the row even where another
// one was faster. Every rank walks the same list, so the barriers inside stay matched.
func (r *Runner) tune(op ops.Op, impl, variant string, n int64, base backend.Launch, drive, check int) (backend.Launch, int64, error) {
	im, _ := r.Reg.ByName(impl)
	if !im.NeedsGPU() {
		return base, 0, nil // nothing to shape
	}
	warps := r.S.TuneWarps
	if len(warps) == 0 {
		warps = []int{4, 8, 16, 32}
	}
	maxBlocks := 128
	if len(im.Kernels[op]) == 0 {
		// the copy engine: blocks = streams the copy is split over; warps do not apply
		warps, maxBlocks = []int{0}, 8
	}
	best, bestT, wrong := base, -1.0, int64(0)
	for blocks := 1; blocks <= maxBlocks; blocks *= 2 {
		if int64(blocks-1)*16 >= n {
			break
		}
		for _, w := range warps {
			l := base
			l.Blocks, l.Warps = blocks, w
			first := r.first
			res, err := r.once(op, variant, l, n, drive, check, max(r.S.Iters/2, 2), false)
			if err != nil {
				return base, 0, err
			}
			wrong += res.wrong
			if first == nil && r.first != nil {
				r.first.Where = strings.TrimSpace(r.Words.Sprintf("in a %s trial of %d blocks x %d warps %s", setting.Tune, blocks, w, r.first.Where))
			}
			// The driver's time decides; share it so every rank picks the same.
			t, err := r.agree(res.us, drive >= 0)
			if err != nil {
				return base, 0, err
			}
			if bestT < 0 || t < bestT {
				best, bestT = l, t
			}
		}
	}
	return best, wrong, nil
}

// agree makes every rank see the driving rank's measurement, through the symmetric
// signal word (rank 0 drives in every tuned round).
func (r *Runner) agree(t float64, driving bool) (float64, error) {
	b := r.B
	var buf [8]byte
	if b.Rank() == 0 {
		binary.LittleEndian.PutUint64(buf[:], uint64(t*1e3))
		for p := 1; p < b.Size(); p++ {
			if err := b.Write(r.latSrc.Slice(0, 8), buf[:]); err != nil {
				return 0, err
			}
			if err := b.Put(r.latSrc.Slice(0, 8), r.latSrc.Slice(0, 8), p, backend.Launch{}); err != nil {
				// the CPU backend ignores Impl; a GPU put of 8 bytes always works
				return 0, err
			}
		}
		if err := b.Quiet(); err != nil {
			return 0, err
		}
	}
	if err := b.Barrier(); err != nil {
		return 0, err
	}
	if err := b.Read(r.latSrc.Slice(0, 8), buf[:]); err != nil {
		return 0, err
	}
	if err := b.Barrier(); err != nil {
		return 0, err
	}
	return float64(binary.LittleEndian.Uint64(buf[:])) / 1e3, nil
}
