package gpu

import (
	"fmt"

	"github.com/symmem/symmem/internal/backend"
)

// Lanes makes lanes 0..n-1 usable: lane 0 is the main stream, every other lane a
// stream of its own, so that operations on different lanes overlap on the GPU.
func (b *Backend) Lanes(n int) error {
	for len(b.lanes) < n {
		s, err := b.dev.NewStream()
		if err != nil {
			return err
		}
		b.lanes = append(b.lanes, s)
	}
	for len(b.laneDone) < len(b.lanes) {
		e, err := b.dev.NewSyncEvent()
		if err != nil {
			return err
		}
		b.laneDone = append(b.laneDone, e)
	}
	return nil
}

// on returns the stream of a Launch's lane.
func (b *Backend) on(l backend.Launch) (stream, error) {
	if l.Lane < 0 || l.Lane >= len(b.lanes) {
		return nil, fmt.Errorf("lane %d: only lanes 0..%d exist (Lanes was not called for it)", l.Lane, len(b.lanes)-1)
	}
	return b.lanes[l.Lane], nil
}

// joinLanes makes the main stream wait for the work queued so far on every other lane:
// what follows on main (a quiet, an end event, a synchronize) then covers every lane.
func (b *Backend) joinLanes() error {
	for i := 1; i < len(b.lanes); i++ {
		if err := b.laneDone[i].Record(b.lanes[i]); err != nil {
			return err
		}
		if err := b.main.Wait(b.laneDone[i]); err != nil {
			return err
		}
	}
	return nil
}

// forkLanes makes every other lane wait for the work queued so far on the main stream:
// a start event recorded there then precedes the work of every lane.
func (b *Backend) forkLanes() error {
	if len(b.lanes) < 2 {
		return nil
	}
	if err := b.laneDone[0].Record(b.main); err != nil {
		return err
	}
	for _, s := range b.lanes[1:] {
		if err := s.Wait(b.laneDone[0]); err != nil {
			return err
		}
	}
	return nil
}
