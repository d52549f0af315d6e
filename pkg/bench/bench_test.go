package bench

import (
	"bytes"
	"testing"
)

func TestSpecSizesAndPairs(t *testing.T) {
	s := Spec{MinSize: 4, MaxSize: 256 << 20, Factor: 2}
	sizes := s.Sizes()
	if len(sizes) != 27 || sizes[0] != 4 || sizes[26] != 256<<20 {
		t.Errorf("sizes = %v", sizes)
	}
	if p := s.Pairs(4); len(p) != 1 || len(p[0]) != 2 || p[0][1] != (Pair{1, 3}) {
		t.Errorf("pairs = %v", p)
	}
	s.Matrix = true
	if p := s.Pairs(3); len(p) != 6 {
		t.Errorf("matrix rounds = %d, want 6", len(p))
	}
}

func TestPatternDiffersPerRankAndShift(t *testing.T) {
	a, b := make([]byte, 4096), make([]byte, 4096)
	pattern(0, a)
	pattern(1, b)
	if bytes.Equal(a, b) {
		t.Fatal("two ranks send the same bytes")
	}
	if bytes.Equal(a[16:16+1024], a[32:32+1024]) {
		t.Fatal("shifted windows are equal: iterations would not differ")
	}
}

func TestMergeAndCompare(t *testing.T) {
	sender := []Row{{Op: "put", Impl: "triton", Size: 1 << 20, Src: 0, Dst: 1, TimesUS: []float64{10, 12, 11}, Checked: false}}
	receiver := []Row{{Op: "put", Impl: "triton", Size: 1 << 20, Src: 0, Dst: 1, Wrong: 3, Checked: true}}
	rows := Merge([][]Row{sender, receiver})
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[0]
	if r.MedUS != 11 || r.MinUS != 10 || r.MaxUS != 12 || r.Wrong != 3 || !r.Checked {
		t.Errorf("merged row %+v", r)
	}
	if want := float64(1<<20) / 11e3; r.GBps != want {
		t.Errorf("GB/s = %g, want %g", r.GBps, want)
	}
	old := Result{Rows: rows}
	slower := rows[0]
	slower.GBps *= 0.9
	cs := CompareResults(old, Result{Rows: []Row{slower}}, 5)
	if len(cs) != 1 || !cs[0].Regression {
		t.Errorf("a 10%% drop is no regression at 5%%: %+v", cs)
	}
	cs = CompareResults(old, Result{Rows: []Row{slower}}, 15)
	if cs[0].Regression {
		t.Error("a 10% drop is a regression at 15%")
	}
}
