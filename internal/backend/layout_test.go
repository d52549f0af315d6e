package backend

import "testing"

// A layout's heap is what carving it takes: it fits a heap of Heap bytes and not one
// an alignment smaller, and every guard follows its buffer.
func TestLayoutHeapIsWhatCarvingTakes(t *testing.T) {
	var l Layout
	l.Add("send", 1000, 0)
	l.Add("recv", 300, 4096)
	l.Add("src", 7, 0)
	l.Add("src", 7, 0)
	if got, want := l.Heap(), int64(1024+4608+256+256); got != want {
		t.Fatalf("heap %d, want %d", got, want)
	}
	c, err := l.Carve(&Bump{Limit: l.Heap()})
	if err != nil {
		t.Fatal(err)
	}
	if r := c.One("recv"); r.Buf.Size != 300 || r.Guard.Off != r.Buf.Off+300 || r.Guard.Size != 4096 || r.All.Size != 4396 {
		t.Errorf("recv %+v", r)
	}
	if len(c["src"]) != 2 || c["src"][0].Buf.Off == c["src"][1].Buf.Off {
		t.Errorf("src %+v", c["src"])
	}
	if _, err := l.Carve(&Bump{Limit: l.Heap() - HeapAlign}); err == nil {
		t.Error("carved into a heap an alignment smaller than Heap")
	}
}
