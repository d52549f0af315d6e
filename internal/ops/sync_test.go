package ops

import (
	"slices"
	"testing"
)

// The signal rounds alternate set and add, each round's word the step times the round,
// and a set taken for an add (or an add for a set) ends elsewhere.
func TestSignalRounds(t *testing.T) {
	var word, asAdd, asSet uint64
	for k := 1; k <= 4; k++ {
		op, v := SignalRound(k, 5)
		if want := []uint64{SignalSet, SignalAdd}[(k+1)%2]; op != want {
			t.Errorf("round %d: op %d, want %d", k, op, want)
		}
		if op == SignalSet {
			word, asAdd, asSet = v, asAdd+v, v
		} else {
			word, asAdd, asSet = word+v, asAdd+v, v
		}
		if word != SignalWord(k, 5) {
			t.Errorf("round %d: word %d, want %d", k, word, SignalWord(k, 5))
		}
	}
	if asAdd == word || asSet == word {
		t.Errorf("every set an add: %d; every op a set: %d; both should differ from %d", asAdd, asSet, word)
	}
}

// Stamps differ by rank and round, and the slots' halves keep consecutive rounds apart.
func TestMeetStamps(t *testing.T) {
	seen := map[uint64]bool{}
	for round := uint64(1); round <= 3; round++ {
		for r := 0; r < 4; r++ {
			s := MeetStamp(r, round)
			if seen[s] {
				t.Errorf("stamp %#x of rank %d round %d repeats", s, r, round)
			}
			seen[s] = true
			if a, b := MeetSlot(r, 4, round), MeetSlot(r, 4, round+1); a == b || a < 0 || a >= MeetSlots(4) {
				t.Errorf("rank %d: rounds %d and %d share slot %d (of %d)", r, round, round+1, a, MeetSlots(4))
			}
		}
	}
	if m, err := LookupMeet(SyncAll); err != nil || m.Pushes {
		t.Errorf("sync-all: %+v, %v", m, err)
	}
	if _, err := LookupMeet("barrier"); err == nil {
		t.Error("a variant named barrier was found")
	}
	got, _ := Op(Barrier).Deliver(Inputs{Ranks: 2, Recv: 16, In: func(r int) []byte { return []byte{byte(r + 1), 0, 0, 0, 0, 0, 0, 0, 9} }})
	if !slices.Equal(got, []byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("barrier delivers %v", got)
	}
}

// The new operations are asked for by name: bench's default sweep stays as it was, and
// their variants are rows of their own.
func TestSyncOpsInTables(t *testing.T) {
	for _, o := range []Op{Signal, PutFlag, Barrier} {
		if slices.Contains(Points(), o) || !o.Runs() {
			t.Errorf("%s: in the default sweep %v, runs %v", o, slices.Contains(Points(), o), o.Runs())
		}
	}
	if v := Op(PutFlag).Variants(""); !slices.Equal(v, []string{Fence, Quiet}) {
		t.Errorf("put-flag's variants: %v", v)
	}
	if v := Op(Barrier).Variants(SyncAll); !slices.Equal(v, []string{SyncAll}) {
		t.Errorf("barrier's variants for --algo sync-all: %v", v)
	}
	if Op(AllReduce).Variants(OneShot) != nil || !Op(Barrier).EveryRank() || Op(Barrier).IsCollective() || !Op(Signal).Bare() || !Op(PutFlag).Flags() {
		t.Error("the ops' properties are not what their files say")
	}
}
