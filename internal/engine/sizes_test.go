package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/pkg/kernels"
)

// A user's kernel that takes its size as a tl.constexpr was built for some sizes only:
// any other is refused before a rank starts (bad input), naming the sizes it has.
// Without the check such a run moved nothing and failed as wrong data (exit 3).
func TestUserSizesCheckedBeforeRanks(t *testing.T) {
	c := &kernels.Catalog{Dir: "mk", Artifacts: []*kernels.Artifact{{Impl: "seed-put", Kernel: "put_block", Entry: "put_block", Sizes: []int64{8, 1 << 20}}}}
	reg, _, err := own.WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkUserSizes(reg, []string{"seed-put"}, []string{"put"}, []int64{8, 1 << 20}); err != nil {
		t.Errorf("sizes it was built for: %v", err)
	}
	err = checkUserSizes(reg, []string{"triton", "seed-put"}, []string{"put"}, []int64{4096})
	var bad *exitcode.Err
	if err == nil || !strings.Contains(err.Error(), "built for 8,1048576 bytes only, not 4096") {
		t.Fatalf("a size it was not built for: %v", err)
	}
	if !errors.As(err, &bad) || bad.Code != exitcode.Usage {
		t.Errorf("a size it was not built for: %v is not bad input (exit %d)", err, exitcode.Usage)
	}
}
