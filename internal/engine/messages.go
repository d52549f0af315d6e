package engine

import (
	"fmt"
	"time"

	"github.com/symmem/symmem/pkg/launch"
	"github.com/symmem/symmem/pkg/launch/store"
)

// noRank0 is the end of a wait for rank 0 that never came: neither its token file
// nor its store appeared. The last error seen (the file's lstat) blamed the file,
// which is rank 0's to write, not the user's to make.
func noRank0(info launch.RankInfo, waited time.Duration) error {
	return fmt.Errorf("rank %d: no rank 0 answered at %s within %s (%s): rank 0 hosts the job's store there and leaves its token in %s; start rank 0 with this job's launcher, or check that every rank has the same job ID and store address",
		info.Rank, info.StoreAddr, waited.Round(time.Second), info.AddrFrom, info.TokenFile)
}

// crowded says, for a job whose ranks did not all join, that the store closed
// connections that had presented no token to make room: another process was
// connecting to its port, and may have kept a rank out for a while.
func crowded(srv *store.Server) string {
	n := srv.Crowded()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; meanwhile the store at %s closed %d connections that presented no token, to make room (another process is connecting to its port: find it with ss -tnp)", srv.Addr(), n)
}
