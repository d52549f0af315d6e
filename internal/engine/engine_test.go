package engine

import (
	"testing"

	"github.com/symmem/symmem/internal/launch"
)

// The GPU probe counts the ranks on this node: all of them when symmem starts them,
// the launcher's local world size under an external one (a 2-node job of 1 rank a node
// was once refused on a 1-GPU node as needing 2 GPUs).
func TestRanksHere(t *testing.T) {
	for _, tc := range []struct {
		info     launch.RankInfo
		external bool
		nproc    int
		want     int
	}{
		{launch.RankInfo{WorldSize: 4, LocalWorldSize: 4}, false, 4, 4},
		{launch.RankInfo{WorldSize: 2, LocalWorldSize: 1}, true, 2, 1},
		{launch.RankInfo{WorldSize: 16, LocalWorldSize: 8}, true, 16, 8},
	} {
		if got := ranksHere(tc.info, tc.external, tc.nproc); got != tc.want {
			t.Errorf("%+v external=%v nproc %d: %d ranks here, want %d", tc.info, tc.external, tc.nproc, got, tc.want)
		}
	}
}
