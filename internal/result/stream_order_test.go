package result

import (
	"bytes"
	"strings"
	"testing"
)

// The last result lists each rank's rows together, so its order may differ from the
// measurements that streamed (a round of two pairs is one measurement): the rows left
// are printed once each, and none twice.
func TestStreamFinishPrintsTheRestByKey(t *testing.T) {
	row := func(op string, src, dst int) Row {
		return Row{Op: op, Impl: "memcpy", Size: 1024, Src: src, Dst: dst, TimesUS: []float64{1}, MedUS: 1, Checked: true}
	}
	h := Header{NProc: 4}
	var out bytes.Buffer
	s := NewStream(&out)
	if err := s.Add(Result{Header: h, Rows: []Row{row("put", 0, 2), row("put", 1, 3)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(Result{Header: h, Rows: []Row{row("put", 0, 2), row("get", 0, 2), row("put", 1, 3), row("get", 1, 3)}}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "1->3"); n != 2 {
		t.Errorf("pair 1->3 printed %d times, want 2 (a put and a get):\n%s", n, out.String())
	}
	if n := strings.Count(out.String(), "0->2"); n != 2 {
		t.Errorf("pair 0->2 printed %d times, want 2:\n%s", n, out.String())
	}
}
