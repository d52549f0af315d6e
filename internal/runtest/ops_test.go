package runtest

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/cpu"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/pkg/kernels"
)

func TestDTypesRoundTrip(t *testing.T) {
	for name, v := range map[string]float64{"int8": -5, "uint8": 200, "int16": -300, "int32": 1 << 20, "int64": -1 << 40,
		"float16": 1.5, "bf16": -2.5, "float32": 0.1, "float64": 1e300} {
		d, err := ops.LookupDType(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := d.Encode(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := strings.TrimSuffix(strings.TrimSuffix(formatFloat(v, d), ".0"), "")
		if got := d.Format(b); got != want {
			t.Errorf("%s(%g) prints %s, want %s", name, v, got, want)
		}
	}
	d, _ := ops.LookupDType("int8")
	if _, err := d.Encode(128); err == nil {
		t.Error("int8 accepted 128")
	}
}

func formatFloat(v float64, d ops.DType) string {
	b, _ := d.Encode(v)
	return d.Format(b)
}

func TestValidate(t *testing.T) {
	s := Spec{Op: "put", DType: "int8", Count: 8, Value: 5, Peer: 1}
	if err := s.Validate(2, "nvshmem", reg); err != nil || s.Pattern != "pair" || s.Launch.Impl != "triton" || s.Bytes != 8 {
		t.Fatalf("Validate = %v, spec %+v", err, s)
	}
	s = Spec{Op: "put", DType: "int8", Count: 8, Value: 125, Peer: 1}
	if err := s.Validate(4, "cpu", reg); err == nil || !strings.Contains(err.Error(), "rank 3") {
		t.Errorf("a ring value past int8 was accepted or named wrongly: %v", err)
	}
	// The registry decides which implementation serves which op, on which backend.
	for _, c := range []struct {
		op                  ops.Op
		impl, backend, want string
	}{
		{"put-signal", "copy-engine", "nvshmem", "{impl} copy-engine cannot run put-signal (it serves put, get, all-gather, broadcast, all-to-all): use {impl} triton or cuda or nccl-device"},
		{"put", "sm-store", "cpu", "{impl} sm-store runs on the nvshmem backend, not on cpu: use memcpy"},
		{"put", "fast", "nvshmem", `unknown {impl} "fast": use triton, cuda, copy-engine, sm-store, nccl-device`}, // those that serve put
		// An op none of symmem's GPU implementations serves says what does.
		{"get-add", "", "nvshmem", `{impl} triton cannot run get-add (it serves put, get, put-signal, latency, all-reduce, all-gather, reduce-scatter, broadcast, all-to-all, dispatch, combine, put-flag, barrier, all-gather-matmul, matmul-reduce-scatter), ` +
			`nor does any of symmem's own on the nvshmem backend: build a user's kernel of it (symmem kernels build; SYMMEM_KERNELS key "get-add") and run it with {kernels} DIR {impl} NAME, or use {backend} cpu`},
	} {
		s := Spec{Op: c.op, DType: "int8", Count: 8, Value: 5, Peer: 1, Launch: backend.Launch{Impl: c.impl}}
		if c.op == ops.GetAdd {
			s.DType = "float32"
		}
		if err := s.Validate(2, c.backend, reg); err == nil || err.Error() != c.want {
			t.Errorf("%s impl %s on %s: %v, want %q", c.op, c.impl, c.backend, err, c.want)
		}
	}
	s = Spec{Op: "put", DType: "int8", Count: 8, Value: 5, Peer: 1, Launch: backend.Launch{Warps: 4}}
	if err := s.Validate(2, "cpu", reg); err == nil || !strings.Contains(err.Error(), "GPU launches") {
		t.Errorf("warps on the CPU backend: %v", err)
	}
}

// runOnCPU runs spec on two ranks of the CPU backend in this process, with rank 0's
// delivery switched off when drop is set, and returns what Run returned on each rank.
func runOnCPU(t *testing.T, spec Spec, drop bool) [2]result.RankResult {
	t.Helper()
	res, _ := runOnCPUWith(t, spec, drop, nil)
	return res
}

// runOnCPUWith is runOnCPU with rank r's backend wrap(r, b) (wrap nil: b), returning
// what each rank printed too.
func runOnCPUWith(t *testing.T, spec Spec, drop bool, wrap func(r int, b *cpu.Backend) backend.Backend) ([2]result.RankResult, [2]string) {
	t.Helper()
	res, outs := runRanks(t, spec, 2, drop, wrap)
	return [2]result.RankResult{res[0], res[1]}, [2]string{outs[0], outs[1]}
}

// runRanks is runOnCPUWith on n ranks.
func runRanks(t *testing.T, spec Spec, n int, drop bool, wrap func(r int, b *cpu.Backend) backend.Backend) ([]result.RankResult, []string) {
	t.Helper()
	if err := spec.Validate(n, "cpu", reg); err != nil {
		t.Fatal(err)
	}
	cpu.ShmDir = t.TempDir()
	path := cpu.HeapPath("ops")
	if err := cpu.Create(path, n, spec.HeapBytes(n, reg)); err != nil {
		t.Fatal(err)
	}
	lay, err := spec.Layout(n, reg)
	if err != nil {
		t.Fatal(err)
	}
	res, errs, outs := make([]result.RankResult, n), make([]error, n), make([]bytes.Buffer, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		b, err := cpu.Open(path, r, n, spec.HeapBytes(n, reg))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		b.WaitLimit = 200 * time.Millisecond
		b.SetDrop(drop && r == 0)
		var be backend.Backend = b
		if wrap != nil {
			be = wrap(r, b)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[r], errs[r] = Run(be, lay, spec, &outs[r])
		}()
	}
	wg.Wait()
	printed := make([]string, n)
	for r, err := range errs {
		if err != nil && !(drop && errors.Is(err, backend.ErrUndelivered)) {
			t.Fatalf("rank %d: %v", r, err)
		}
		printed[r] = outs[r].String()
	}
	return res, printed
}

// scratchOverrun writes 8 bytes past the scratch (or the output) of every collective
// it runs, as a kernel that overruns its promise would.
type scratchOverrun struct {
	*cpu.Backend
	output bool
}

func (o scratchOverrun) Collective(c backend.Collective, l backend.Launch) error {
	if err := o.Backend.Collective(c, l); err != nil {
		return err
	}
	past := c.Scratch.Off + c.Scratch.Size
	if o.output {
		past = c.Recv.Off + c.Recv.Size
	}
	return o.Backend.Write(backend.Buffer{Off: past, Size: 8}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
}

// A run whose implementation writes past its scratch, or past its output, fails on
// that rank, saying so, though its output is right: all-reduce and dispatch (the MoE
// path has its own buffers).
func TestRunCatchesAnOverrun(t *testing.T) {
	for _, spec := range []Spec{
		{Op: ops.AllReduce, Count: 1024, DType: "float32", Launch: backend.Launch{Impl: "memcpy"}},
		{Op: ops.Dispatch, DType: "bf16", MoE: &coll.MoE{Tokens: 16, Hidden: 32, TopK: 2, Experts: 4, Seed: 1}, Launch: backend.Launch{Impl: "memcpy"}},
	} {
		if res := runOnCPU(t, spec, false); !res[0].OK || !res[1].OK {
			t.Fatalf("%s: a clean run: %+v", spec.Op, res)
		}
		res, outs := runOnCPUWith(t, spec, false, func(r int, b *cpu.Backend) backend.Backend {
			if r == 1 {
				return scratchOverrun{Backend: b}
			}
			return b
		})
		if !res[0].OK || res[1].OK || res[1].Wrong != 0 || res[1].PastScratch != 8 || !strings.Contains(outs[1], "Rank 1: 8 bytes written past the scratch (it was given ") {
			t.Errorf("%s: rank 1 wrote past its scratch: %+v, printed %q", spec.Op, res, outs[1])
		}
		res, outs = runOnCPUWith(t, spec, false, func(r int, b *cpu.Backend) backend.Backend {
			if r == 0 {
				return scratchOverrun{Backend: b, output: true}
			}
			return b
		})
		if res[0].OK || res[0].Wrong != 0 || res[0].PastOutput != 8 || !res[1].OK || !strings.Contains(outs[0], "Rank 0: 8 bytes written past the output (it was given ") {
			t.Errorf("%s: rank 0 wrote past its output: %+v, printed %q", spec.Op, res, outs[0])
		}
	}
}

// A put or get that never happened must show up in what Run returns: every element
// of the receiver's buffer wrong, not a pass on what the buffer held before.
func TestRunReportsDroppedData(t *testing.T) {
	for _, op := range []ops.Op{"put", "get"} {
		spec := Spec{Op: op, DType: "int32", Count: 64, Value: 5, Peer: 1}
		got := runOnCPU(t, spec, false)
		checker := 1
		if op == "get" {
			checker = 0
		}
		if r := got[checker]; !r.OK || r.Wrong != 0 || r.From < 0 {
			t.Errorf("%s delivered: rank %d returned %+v", op, checker, r)
		}
		got = runOnCPU(t, spec, true)
		if r := got[checker]; r.OK || r.Wrong != 64 {
			t.Errorf("%s dropped: rank %d returned ok=%v wrong=%d, want 64 wrong elements", op, checker, r.OK, r.Wrong)
		}
	}
}

// A put-signal whose signal never comes ends the receiver's wait with ErrUndelivered
// instead of a hang.
func TestRunPutSignalDroppedIsUndelivered(t *testing.T) {
	spec := Spec{Op: "put-signal", DType: "int8", Count: 8, Value: 5, Peer: 1}
	if err := spec.Validate(2, "cpu", reg); err != nil {
		t.Fatal(err)
	}
	cpu.ShmDir = t.TempDir()
	path := cpu.HeapPath("ps")
	if err := cpu.Create(path, 2, spec.HeapBytes(2, reg)); err != nil {
		t.Fatal(err)
	}
	// Rank 0 puts nothing and then waits in the last barrier for a peer that has
	// failed (a real job's launcher stops it); its heap stays mapped to the end.
	recv := make(chan error, 1)
	for r := 0; r < 2; r++ {
		b, err := cpu.Open(path, r, 2, spec.HeapBytes(2, reg))
		if err != nil {
			t.Fatal(err)
		}
		b.WaitLimit = 100 * time.Millisecond
		b.SetDrop(r == 0)
		go func() {
			_, err := Run(b, layoutOf(t, spec, reg), spec, io.Discard)
			if b.Rank() == 1 {
				recv <- err
			}
		}()
	}
	var errs [2]error
	select {
	case errs[1] = <-recv:
	case <-time.After(5 * time.Second):
		t.Fatal("a put-signal that never signals hangs the receiver")
	}
	if !errors.Is(errs[1], backend.ErrUndelivered) || !strings.Contains(errs[1].Error(), "from rank 0") {
		t.Errorf("receiver's error: %v", errs[1])
	}
}

func TestCountWrong(t *testing.T) {
	want := []byte{1, 2, 3, 4}
	got := bytes.Repeat(want, 100000)
	if n := countWrong(got, want); n != 0 {
		t.Fatalf("%d wrong in a clean buffer", n)
	}
	got[5] = 9       // element 1
	got[399999] = 0  // last element
	got[50000*4] = 7 // element 50000
	if n := countWrong(got, want); n != 3 {
		t.Fatalf("%d wrong, want 3", n)
	}
}

// recorder is rank 0 of a two-rank CPU heap that meets nobody: its barriers return at
// once, and the collective it is handed is kept, not run.
type recorder struct {
	*cpu.Backend
	got *backend.Collective
}

func (r recorder) Barrier() error { return nil }
func (r recorder) Collective(c backend.Collective, l backend.Launch) error {
	*r.got = c
	return errors.New("recorded")
}

// recordedRun runs spec's test as rank 0 of 2 on a CPU heap of the size HeapBytes plans,
// and returns the collective it asked for (recorder stops it there).
func recordedRun(t *testing.T, reg *backend.Registry, spec Spec) backend.Collective {
	t.Helper()
	cpu.ShmDir = t.TempDir()
	path := cpu.HeapPath("rec")
	if err := cpu.Create(path, 2, spec.HeapBytes(2, reg)); err != nil {
		t.Fatal(err)
	}
	b, err := cpu.Open(path, 0, 2, spec.HeapBytes(2, reg))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var got backend.Collective
	if _, err := Run(recorder{b, &got}, layoutOf(t, spec, reg), spec, io.Discard); err == nil || !strings.Contains(err.Error(), "recorded") {
		t.Fatalf("%s %s: %v", spec.Op, spec.Launch.Impl, err)
	}
	return got
}

// A run of a user's collective gives its kernel the scratch kernels.Signatures
// promises (2 x n x one rank's share), and plans the heap for it; symmem's own get the
// output's size.
func TestRunGivesAUsersCollectiveItsScratch(t *testing.T) {
	c, err := kernels.LoadDir("../../pkg/kernels/testdata/userar")
	if err != nil {
		t.Fatal(err)
	}
	reg, _, err := own.WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		impl string
		want int64
	}{{"one-shot-all-reduce", 2 * 2 * 2048}, {"memcpy", 2048}} {
		spec := Spec{Op: ops.AllReduce, Count: 1024, DType: "bf16", Launch: backend.Launch{Impl: tc.impl}}
		if err := spec.Validate(2, "nvshmem", reg); err != nil && tc.impl != "memcpy" {
			t.Fatal(err)
		}
		spec.Bytes = 2048
		a := func(n int64) int64 { return backend.Align(n, backend.HeapAlign) }
		if got, want := spec.HeapBytes(2, reg), a(2048)+a(2048+coll.Guard)+a(tc.want+coll.Guard); got != want { // input, output and scratch with their guards
			t.Errorf("%s: heap %d, want %d", tc.impl, got, want)
		}
		got := recordedRun(t, reg, spec)
		if got.Scratch.Size != tc.want {
			t.Errorf("%s: scratch of %d bytes, want %d", tc.impl, got.Scratch.Size, tc.want)
		}
	}
}

// A run of a user's dispatch or combine gives its kernel the scratch kernels.Signatures
// promises (2 x n x the token buffer) inside the heap planned for it; symmem's own
// get the larger of the token buffer and the received copies.
func TestRunGivesAUsersMoEItsScratch(t *testing.T) {
	c, err := kernels.LoadDir("../../pkg/kernels/testdata/usermoe")
	if err != nil {
		t.Fatal(err)
	}
	reg, _, err := own.WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	m := coll.MoE{Tokens: 40, Hidden: 64, TopK: 3, Experts: 8, Seed: 2}
	rt, err := m.Route(2, 2)
	if err != nil {
		t.Fatal(err)
	}
	most := max(rt.Bytes(), rt.MaxSlots())
	for _, tc := range []struct {
		op   ops.Op
		impl string
		want int64
	}{{ops.Dispatch, "moe-all-to-all", 2 * 2 * rt.Bytes()}, {ops.Combine, "moe-all-to-all", 2 * 2 * rt.Bytes()}, {ops.Combine, "triton", most}} {
		spec := Spec{Op: tc.op, DType: "bf16", MoE: &m, Launch: backend.Launch{Impl: tc.impl}}
		if err := spec.Validate(2, "nvshmem", reg); err != nil {
			t.Fatal(err)
		}
		got := recordedRun(t, reg, spec)
		if got.Scratch.Size != tc.want {
			t.Errorf("%s %s: scratch of %d bytes, want %d", tc.op, tc.impl, got.Scratch.Size, tc.want)
		}
	}
}

// reg is symmem's own implementations, for the tests of no user's.
var reg = own

// layoutOf is spec's layout on 2 ranks.
func layoutOf(t *testing.T, spec Spec, reg *backend.Registry) backend.Layout {
	t.Helper()
	l, err := spec.Layout(2, reg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// tmpGetAdd runs get-add as a user's kernel does: the peer's source got into tmp
// (unless it skips the get), then dst = local + tmp.
type tmpGetAdd struct {
	*cpu.Backend
	skipGet bool
}

func (g tmpGetAdd) GetAdd(dst, local, src, tmp backend.Buffer, peer int, dtype string, l backend.Launch) error {
	if !g.skipGet {
		if err := g.Get(tmp, src, peer, l); err != nil {
			return err
		}
	}
	mine, got, out := make([]byte, dst.Size), make([]byte, dst.Size), make([]byte, dst.Size)
	if err := g.Read(local, mine); err != nil {
		return err
	}
	if err := g.Read(tmp, got); err != nil {
		return err
	}
	if err := coll.Reduce(ops.Sum, dtype, out, mine, got); err != nil {
		return err
	}
	return g.Write(dst, out)
}

// get-add's tmp is symmetric room of the message's size, which the receiver fills
// with the complement of its peer's value first: an implementation that gets into it
// and adds passes; one that adds tmp without getting into it fails, though the peer's
// value is 0 (a tmp left as zeros would have passed).
func TestGetAddTmp(t *testing.T) {
	spec := Spec{Op: ops.GetAdd, Count: 100, DType: "bf16", Value: 0, Peer: 1, Launch: backend.Launch{Impl: "memcpy"}}
	for _, skip := range []bool{false, true} {
		res, _ := runOnCPUWith(t, spec, false, func(_ int, b *cpu.Backend) backend.Backend { return tmpGetAdd{b, skip} })
		if res[0].OK == skip {
			t.Errorf("skip the get %v: rank 0 passed %v (%+v)", skip, res[0].OK, res[0])
		}
	}
}

// The one-to-all pattern is put's: rank 0 puts its message into every other rank, each
// of which checks it holds all of it. A user's put whose kernel reaches every peer itself
// takes it by default on more than 2 ranks and refuses pair and ring there, where each
// sender has one receiver; on 2 ranks every pattern is the same delivery.
func TestValidateOneToAll(t *testing.T) {
	c := &kernels.Catalog{Dir: "mk", Artifacts: []*kernels.Artifact{{Impl: "st", Kernel: "put_block", Entry: "put_block", Peers: kernels.PeersAll, InPlace: true},
		{Impl: "one", Kernel: "put_block", Entry: "put_block", InPlace: true}}}
	withUser, _, err := own.WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		op               ops.Op
		impl, pattern    string
		n                int
		backend, want    string
		wantPattern, why string
	}{
		{"put", "", "", 3, "cpu", "", "ring", "symmem's own: a ring on more than 2 ranks"},
		{"put", "", ops.OneToAll, 3, "cpu", "", ops.OneToAll, "asked for"},
		{"put", "st", "", 3, "nvshmem", "", ops.OneToAll, "a put to every peer: its own pattern"},
		{"put", "st", "", 2, "nvshmem", "", "pair", "2 ranks: the pair is every peer"},
		{"put", "st", ops.OneToAll, 2, "nvshmem", "", ops.OneToAll, "2 ranks: one-to-all is the pair"},
		{"put", "st", "ring", 2, "nvshmem", "{pattern} ring: {impl} st puts its buffer in place (it sends its own dst), so a rank that sends it cannot also receive there: use {pattern} one-to-all", "", ""},
		{"put", "st", "ring", 3, "nvshmem", "{pattern} ring: {impl} st puts its buffer in place", "", ""},
		{"put", "st", "pair", 4, "nvshmem", "{pattern} pair: {impl} st puts to every other rank from one launch, and pair gives each sender one receiver: use {pattern} one-to-all (on 2 ranks, pair is the same delivery)", "", ""},
		{"put", "one", "", 3, "nvshmem", "", "pair", "a put in place to one peer: one sender, a pair on any number of ranks"},
		{"put", "one", "ring", 3, "nvshmem", "{pattern} ring: {impl} one puts its buffer in place (it sends its own dst), so a rank that sends it cannot also receive there: use {pattern} pair (one sender, rank 0)", "", ""},
		{"put", "one", "ring", 2, "nvshmem", "{pattern} ring: {impl} one puts its buffer in place", "", ""},
		{"get", "", ops.OneToAll, 3, "cpu", "{pattern} one-to-all: get runs pair or ring; one rank to every other is for put", "", ""},
		{"put", "", "star", 3, "cpu", `unknown {pattern} "star": use pair, ring or one-to-all`, "", ""},
		{"put-signal", "", "star", 3, "cpu", `unknown {pattern} "star": use pair or ring`, "", ""},
	} {
		s := Spec{Op: tc.op, Pattern: tc.pattern, DType: "int8", Count: 8, Value: 5, Peer: 1, Launch: backend.Launch{Impl: tc.impl}}
		err := s.Validate(tc.n, tc.backend, withUser)
		if tc.want == "" && (err != nil || s.Pattern != tc.wantPattern) || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s %s %q on %d ranks (%s): pattern %q, %v; want %q %q", tc.op, tc.impl, tc.pattern, tc.n, tc.why, s.Pattern, err, tc.wantPattern, tc.want)
		}
	}
}

// A one-to-all put: rank 0 puts once to each peer (a backend that puts to every peer
// itself is asked once), every other rank receives rank 0's value and checks all of it;
// a drop on rank 0 leaves every receiver wrong.
func TestRunOneToAll(t *testing.T) {
	const n = 4
	spec := Spec{Op: "put", Pattern: ops.OneToAll, DType: "int32", Count: 64, Value: 5, Peer: 1}
	var puts, putAlls [n]int
	count := func(r int, b *cpu.Backend) backend.Backend {
		if r == 2 {
			return &allPutter{Backend: b, calls: &putAlls[r]}
		}
		return &putCounter{Backend: b, calls: &puts[r]}
	}
	res, outs := runRanks(t, spec, n, false, count)
	for r := range n {
		want := 0
		if r == 0 {
			want = -1
		}
		if res[r].From != want || !res[r].OK || res[r].Wrong != 0 || r > 0 && !strings.Contains(outs[r], "received out=[5, 5, 5, ") {
			t.Errorf("rank %d: %+v, printed %q", r, res[r], outs[r])
		}
	}
	if puts[0] != n-1 || puts[1]+puts[3]+putAlls[2] != 0 {
		t.Errorf("rank 0 put %d times, the receivers %v %v: want one put to each of the %d peers", puts[0], puts, putAlls, n-1)
	}
	res, _ = runRanks(t, spec, n, false, func(r int, b *cpu.Backend) backend.Backend { return &allPutter{Backend: b, calls: &putAlls[r]} })
	if putAlls[0] != 1 || !res[1].OK {
		t.Errorf("a backend that puts to every peer itself was asked %d times: %+v", putAlls[0], res)
	}
	res, _ = runRanks(t, spec, n, true, nil)
	for r := 1; r < n; r++ {
		if res[r].OK || res[r].Wrong != 64 || res[r].From != 0 {
			t.Errorf("dropped: rank %d returned %+v, want 64 wrong elements from rank 0", r, res[r])
		}
	}
}

// putCounter counts the Puts of the backend under it; allPutter puts to every peer
// itself (backend.AllPutter), counting the calls.
type putCounter struct {
	*cpu.Backend
	calls *int
}

func (p *putCounter) Put(dst, src backend.Buffer, peer int, l backend.Launch) error {
	*p.calls++
	return p.Backend.Put(dst, src, peer, l)
}

type allPutter struct {
	*cpu.Backend
	calls *int
}

func (p *allPutter) PutAll(dst, src backend.Buffer, l backend.Launch) error {
	*p.calls++
	for q := range p.Size() {
		if q != p.Rank() {
			if err := p.Backend.Put(dst, src, q, l); err != nil {
				return err
			}
		}
	}
	return nil
}
