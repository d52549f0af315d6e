package ops

import "fmt"

// Barrier is every rank meeting (nvshmem_barrier_all or nvshmem_sync_all, its
// variants), checked: each rank writes its stamp before it, and every rank must see
// every rank's stamp after it.
const Barrier = "barrier"

var _ = define(Barrier, def{order: 13, family: FamilyMeeting, takes: []Setting{AlgoSetting}, help: "every rank meets (barrier-all, then sync-all), each checking every rank's stamp", runs: true, extra: true, deliver: stamps,
	algos: []string{BarrierAll, SyncAll}, variants: true,
	title: "barrier (time: mean over ranks of one meeting; every rank's stamp checked on every rank)"})

// The variants of barrier, as --algo names them.
const (
	BarrierAll = "barrier-all" // nvshmem_barrier_all: completes every rank's puts, then meets
	SyncAll    = "sync-all"    // nvshmem_sync_all: meets, completing nothing
)

// Meet is one variant of barrier: how a rank's stamp reaches the others.
type Meet struct {
	Name string
	// Pushes says each rank puts its stamp into every rank's slots before the barrier
	// and reads its own slots after it (barrier_all completes the puts); otherwise it
	// stores its stamp in its own slots and fetches every rank's after the barrier
	// (sync_all completes no put, so only local stores may come before it).
	Pushes bool
}

// Meets are barrier's variants.
var Meets = []Meet{{Name: BarrierAll, Pushes: true}, {Name: SyncAll}}

// LookupMeet finds barrier's variant name.
func LookupMeet(name string) (Meet, error) {
	for _, m := range Meets {
		if m.Name == name {
			return m, nil
		}
	}
	return Meet{}, fmt.Errorf("barrier has no variant %q: use %s or %s", name, BarrierAll, SyncAll)
}

// MeetStamp is what rank writes before barrier round round (from 1): unlike any other
// rank's, and any other round's.
func MeetStamp(rank int, round uint64) uint64 { return round<<16 | uint64(rank+1) }

// MeetSlots is how many 8-byte words a barrier's slots take on n ranks: a word per
// rank for odd rounds and another for even ones, so that a rank already writing the
// next round's stamps cannot overwrite what a slower one is still to read.
func MeetSlots(n int) int64 { return int64(2 * n) }

// MeetSlot is the word of the slots that rank's stamp takes in round round.
func MeetSlot(rank, n int, round uint64) int64 { return int64(round%2)*int64(n) + int64(rank) }

// stamps is a barrier's delivery: the first 8 bytes of every rank's input, in rank
// order (what each rank wrote before the barrier, seen by every rank after it).
func stamps(in Inputs) ([]byte, error) {
	out := in.out()
	for r := 0; r < in.Ranks; r++ {
		copy(out[8*r:8*r+8], in.In(r))
	}
	return out, nil
}
