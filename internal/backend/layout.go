package backend

// Layout is a job's symmetric buffers, in the order every rank carves them from its
// heap: planned once, by the launcher, and carved by every rank (Carve), so that the
// heap asked for and the buffers used cannot drift apart.
type Layout struct {
	Slots []Slot `json:"slots"`
	// Slack is room the heap keeps beyond the slots.
	Slack int64 `json:"slack,omitempty"`
}

// Slot is one buffer of a layout, followed by Guard bytes that nothing may write (a
// check reads them afterwards: an implementation that overran the buffer spoiled them).
type Slot struct {
	Name  string `json:"name"`
	Size  int64  `json:"size"`
	Guard int64  `json:"guard,omitempty"`
}

// Add appends a buffer of size bytes followed by guard bytes.
func (l *Layout) Add(name string, size, guard int64) {
	l.Slots = append(l.Slots, Slot{Name: name, Size: size, Guard: guard})
}

// Heap is the symmetric heap per rank the layout takes (each slot aligned as Bump
// aligns it).
func (l Layout) Heap() int64 {
	h := l.Slack
	for _, s := range l.Slots {
		h += Align(s.Size+s.Guard, HeapAlign)
	}
	return h
}

// Region is a carved slot: the buffer, the guard after it, and both together.
type Region struct {
	Buf, Guard, All Buffer
}

// Carved are a layout's regions by name, in the order the layout lists them.
type Carved map[string][]Region

// Allocator is what Carve needs of a backend (Bump has it too).
type Allocator interface {
	Alloc(size int64) (Buffer, error)
}

// Carve allocates every slot of l on b, in order.
func (l Layout) Carve(b Allocator) (Carved, error) {
	out := Carved{}
	for _, s := range l.Slots {
		all, err := b.Alloc(s.Size + s.Guard)
		if err != nil {
			return nil, err
		}
		out[s.Name] = append(out[s.Name], Region{Buf: all.Slice(0, s.Size), Guard: all.Slice(s.Size, s.Guard), All: all})
	}
	return out, nil
}

// One is the only region named name (the zero Region where there is none).
func (c Carved) One(name string) Region {
	if rs := c[name]; len(rs) > 0 {
		return rs[0]
	}
	return Region{}
}
