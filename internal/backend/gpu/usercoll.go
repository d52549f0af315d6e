package gpu

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/kernels"
)

// A user's collective kernels (symmem kernels build, --kernels DIR): symmem launches
// the op's kernel (the one for the element type where it sums) once per operation with the arguments of
// kernels.Signatures, on the grid ShapeFor picks. Their signal words lie in the sync
// area past the LL128 areas: n per block, zeroed with the rest before the first
// collective kernel; seq counts this rank's launches of them from 1.

// userColl says whether impl runs op by a user's collective kernel.
func userColl(impl backend.Impl, op ops.Op) bool {
	return impl.User && ops.Op(op).IsCollective()
}

// userSigOff is where the user kernels' signal words start in the sync area.
func userSigOff(size int) int64 {
	return backend.Align(ll128AreaOff(size)+ll128Area(size), 256)
}

// userSigArea is the size of the user kernels' signal words: size per block.
func userSigArea(size int) int64 { return MaxCollBlocks * int64(size) * 8 }

// userKernel is impl's kernel for c: the op's, by element type and reduction operator
// where it reduces (pkg/kernels' table: one kernel each); the error says which it has.
func userKernel(impl backend.Impl, c backend.Collective) (string, error) {
	var table []kernels.UserKernel
	for _, k := range kernels.UserKernels() {
		if k.Op == string(c.Op) && k.Coll {
			table = append(table, k)
		}
	}
	if !ops.Op(c.Op).Reduces() {
		return table[0].Kernel, nil
	}
	// What it has: element types, and each one's operators.
	var types []string
	ofType := map[string][]string{}
	for _, k := range table {
		if slices.Contains(impl.Kernels[c.Op], k.Kernel) {
			if !slices.Contains(types, k.DType) {
				types = append(types, k.DType)
			}
			ofType[k.DType] = append(ofType[k.DType], k.RedOp)
		}
	}
	dt, red := ops.Canonical(c.DType), c.RedOp.String()
	if !ops.Op(c.Op).TakesRedOp() {
		red = "" // combine: one kernel per type, which sums
	}
	for _, k := range table {
		if k.DType == dt && (red == "" || k.RedOp == red) && slices.Contains(impl.Kernels[c.Op], k.Kernel) {
			return k.Kernel, nil
		}
	}
	keyOf := func(dt string) string {
		for _, k := range table {
			if k.DType == dt && (red == "" || k.RedOp == red) {
				return k.Key
			}
		}
		return string(c.Op)
	}
	if !slices.ContainsFunc(table, func(k kernels.UserKernel) bool { return k.DType == dt }) {
		return "", setting.Errorf("%s %s %s: a user's %s sums bf16 or float32, not %s: use %s %s", c.Op, setting.Impl, impl.Name, c.Op, c.DType, setting.DType, strings.Join(types, " or "))
	}
	var with []string // the types it has a kernel of red for
	for _, t := range types {
		if red == "" || slices.Contains(ofType[t], red) {
			with = append(with, t)
		}
	}
	switch {
	case len(with) > 0 && !slices.Contains(types, dt):
		return "", setting.Errorf("%s %s %s: no kernel for %s (it has %s): build one under SYMMEM_KERNELS key %q, or use %s %s",
			c.Op, setting.Impl, impl.Name, dt, strings.Join(types, ", "), keyOf(dt), setting.DType, strings.Join(with, " or "))
	case len(with) > 0:
		return "", setting.Errorf("%s %s %s: no %s kernel for %s (its %s kernels combine with %s): build one under SYMMEM_KERNELS key %q, or use %s %s",
			c.Op, setting.Impl, impl.Name, red, dt, dt, strings.Join(ofType[dt], ", "), keyOf(dt), setting.DType, strings.Join(with, " or "))
	}
	var reds []string
	for _, t := range types {
		for _, r := range ofType[t] {
			if !slices.Contains(reds, r) {
				reds = append(reds, r)
			}
		}
	}
	return "", setting.Errorf("%s %s %s: its kernels combine with %s, not %s: build one under SYMMEM_KERNELS key %q, or use %s %s",
		c.Op, setting.Impl, impl.Name, strings.Join(reds, ", "), red, keyOf(dt), setting.RedOp, strings.Join(reds, " or "))
}

// userShare is the elements of one rank's share of c (what a user's kernel gets as
// nelem) and their size: bytes where c only moves data.
func userShare(c backend.Collective, n int64) (nelem, elem int64) {
	elem, share := int64(1), c.Bytes
	if ops.Op(c.Op).Reduces() {
		elem = ops.ElemSize(c.DType)
	}
	if ops.Op(c.Op).Splits() {
		share /= n
	}
	return share / elem, elem
}

// CheckCollective says whether impl can run c (a collective's op, element type,
// reduction operator and --algo) with blocks blocks (0: ShapeFor's choice), where the
// answer is known before any rank starts (run and bench ask then): each
// implementation's check says (NCCL takes no --algo; a user's implementation needs a
// kernel for the type and operator, a grid the signal words hold, and no --algo). An
// --algo that names another op's algorithm is not op's.
func CheckCollective(reg *backend.Registry, impl string, c backend.Collective, blocks int) error {
	im, ok := reg.ByName(impl)
	if !ok {
		return nil
	}
	gi, ok := implOf(im)
	ck, has := gi.(checker)
	if !ok || !has {
		return nil
	}
	if c.Algo != "" && !slices.Contains(ops.ForAlgo(c.Algo), c.Op) {
		c.Algo = ""
	}
	return ck.check(im, c, blocks)
}

// check: a kernel for the type and operator, a grid the signal words hold, and no
// --algo; for get-add (one block, no collective), a kernel for the type.
func (userImpl) check(im backend.Impl, c backend.Collective, blocks int) error {
	if c.Op == ops.GetAdd && im.Supports(c.Op) {
		_, err := userTypedKernel(im, c.Op, c.DType)
		return err
	}
	if !userColl(im, c.Op) || !im.Supports(c.Op) {
		return nil
	}
	if _, err := userKernel(im, c); err != nil {
		return err
	}
	if err := userGrid(im.Name, blocks); err != nil {
		return err
	}
	if c.Algo != "" {
		return userAlgo(im.Name, c.Algo)
	}
	return nil
}

// UserUnbounded lists the kernels of the user's implementation impl for op (a
// collective) that do not take the wait limit and mailbox: they cannot give up on a
// peer that never comes, and symmem does not bound its wait for a bench's timed
// window (nor NCCL's), so such a job ends only at its --timeout.
func UserUnbounded(reg *backend.Registry, impl string, op ops.Op) []string {
	im, ok := reg.ByName(impl)
	c, user := reg.Catalog(impl)
	if !ok || !user || !userColl(im, op) {
		return nil
	}
	var out []string
	for _, a := range c.Artifacts {
		if a.Impl == impl && slices.Contains(im.Kernels[op], a.Kernel) && !(a.Takes(paramLimit) && a.Takes(paramMailbox)) && !slices.Contains(out, a.Kernel) {
			out = append(out, a.Kernel)
		}
	}
	return out
}

// userGrid refuses more blocks than the signal words hold.
func userGrid(impl string, blocks int) error {
	if blocks > MaxCollBlocks {
		return setting.Errorf("%s %d: a user's collective kernel (%s %s) runs at most %d blocks (the signal words hold %d); give %s %d or fewer",
			setting.Blocks, blocks, setting.Impl, impl, MaxCollBlocks, MaxCollBlocks, setting.Blocks, MaxCollBlocks)
	}
	return nil
}

func ncclAlgo(algo, impl string) error {
	return setting.Errorf("%s %s: NCCL picks its own algorithms (NCCL_ALGO sets them); leave %s out for %s %s", setting.Algo, algo, setting.Algo, setting.Impl, impl)
}

func userAlgo(impl, algo string) error {
	return setting.Errorf("%s %s: a user's kernel runs its own algorithm; leave %s out for %s %s", setting.Algo, algo, setting.Algo, setting.Impl, impl)
}

// userImpl is a user's kernels (an implementation of --kernels DIR): the point-to-point
// ones as symmem's NVSHMEM kernels, and collective kernels of their own.
type userImpl struct{ nvshmemKernels }

var _ interface {
	mover
	signaller
	pinger
	flagger
	collective
	checker
	preloader
	ownKernel
	fuser
} = userImpl{}

func (userImpl) ownKernel() {}

// move is a put or get by the user's put_block or get_block. A put whose kernel reaches
// every other rank itself (backend.Impl.ReachesAll) is a put to one peer only where that
// peer is the only one: in a larger job it would reach the others too (PutAll launches
// it, for the one-to-all pattern).
func (u userImpl) move(b *Backend, impl backend.Impl, dst, src backend.Buffer, peer int, l backend.Launch, op ops.Op, st stream) error {
	if impl.ReachesAll(op) && b.size > 2 {
		return setting.Errorf("%s %s %s puts to every other rank from one launch, not to rank %d alone: run put with %s %s",
			op, setting.Impl, impl.Name, peer, setting.Pattern, ops.OneToAll)
	}
	return u.nvshmemKernels.move(b, impl, dst, src, peer, l, op, st)
}

// putFlag is the user's kernel of order's variant (pkg/kernels: put_flag_fence,
// put_flag_quiet), which orders by itself, with a word of this lane's to put the flag
// from. The unordered test fault cannot reach into it: the order is the kernel's.
func (userImpl) putFlag(b *Backend, impl backend.Impl, dst, src, flag backend.Buffer, value uint64, order string, peer int, l backend.Launch, st stream) error {
	var kernel string
	var have []string
	for _, k := range kernels.UserKernels() {
		if k.Op == string(ops.PutFlag) && slices.Contains(impl.Kernels[ops.PutFlag], k.Kernel) {
			have = append(have, k.Variant)
			if k.Variant == order {
				kernel = k.Kernel
			}
		}
	}
	if kernel == "" {
		return setting.Errorf("put-flag %s %s has no kernel ordered by %s (it has %s): leave %s out or give %s %s", setting.Impl, impl.Name, order, strings.Join(have, ", "), setting.Algo, setting.Algo, strings.Join(have, " or "))
	}
	if l.Lane >= maxFlagLanes {
		return setting.Errorf("put-flag %s %s: lane %d: a user's put-flag runs on lanes 0..%d", setting.Impl, impl.Name, l.Lane, maxFlagLanes-1)
	}
	n := min(dst.Size, src.Size)
	sh := ShapeFor(n, l)
	flagSrc := uint64(b.sync) + uint64(userFlagOff(b.size)) + 8*uint64(l.Lane)
	return b.launch(st, impl.Name, kernel, sh, 1, b.addr(dst), b.addr(src), uint64(n), b.addr(flag), flagSrc, value, uint64(peer))
}

func (userImpl) home() home { return onHeap }

// reach: its kernels call NVSHMEM (what else they do is theirs to say).
func (userImpl) reach(backend.Impl, ops.Op) reach { return byCalls }

// preload: the sync area where a collective kernel runs op (its signal words), and the
// kernels.
func (userImpl) preload(b *Backend, impl backend.Impl, op ops.Op, n int64, l backend.Launch) error {
	return preloadColl(b, impl, op, n, l, userColl(impl, op))
}

// run queues c as impl's kernel on st, with the arguments of
// kernels.Signatures: the buffers, then the share (collParams' nelem) or, for dispatch
// and combine, this rank's routing tables and the token's shape (moeParams), then the
// signal words, seq, the rank and the ranks. Under the drop fault the kernel is given
// Scratch for its output: what this rank would write into its own Recv, or put into a
// peer's, lands in scratch instead.
func (userImpl) run(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch, st stream) error {
	if l.Lane != 0 {
		return setting.Errorf("%s %s runs collectives on one stream only (lane %d asked)", setting.Impl, impl.Name, l.Lane)
	}
	kernel, err := userKernel(impl, c)
	if err != nil {
		return err
	}
	if c.Algo != "" {
		return userAlgo(impl.Name, c.Algo)
	}
	if err := userGrid(impl.Name, l.Blocks); err != nil {
		return err
	}
	// What comes between the buffers and the signal words, and the scratch promised.
	n := int64(b.size)
	var shape []uint64
	var need int64
	var promised string
	if c.Op.Routed() {
		t, err := b.userMoETable(c)
		if err != nil {
			return err
		}
		elem := int64(1)
		if c.Op == ops.Combine {
			elem = ops.ElemSize(c.DType)
		}
		if t.token%elem != 0 {
			return setting.Errorf("%s %s %s: a token of %d bytes is no whole number of %s elements", c.Op, setting.Impl, impl.Name, t.token, c.DType)
		}
		// slots, origin, tokens, nslots, hidden
		shape = []uint64{t.mem, t.mem + 4*uint64(t.tokens*n), uint64(t.tokens), uint64(t.slots), uint64(t.token / elem)}
		need, promised = 2*n*t.tokens*t.token, fmt.Sprintf("2 x %d ranks x %d tokens x %d bytes", n, t.tokens, t.token)
	} else {
		nelem, elem := userShare(c, n)
		shape = []uint64{uint64(nelem)}
		need, promised = 2*n*nelem*elem, fmt.Sprintf("2 x %d ranks x %d bytes", n, nelem*elem)
	}
	if c.Scratch.Size < need {
		return setting.Errorf("%s %s %s: the %d-byte scratch is smaller than the %d bytes its kernel is promised (%s)", c.Op, setting.Impl, impl.Name, c.Scratch.Size, need, promised)
	}
	if err := b.ensureSync(); err != nil {
		return err
	}
	recv := c.Recv
	if b.drop {
		recv = c.Scratch
	}
	b.userSeq++
	sh := ShapeFor(c.Bytes, l)
	sh.Warps = b.builtWarps(impl.Name, kernel, sh.Warps, l)
	sig := uint64(b.sync) + uint64(userSigOff(b.size))
	args := append([]uint64{b.addr(c.Send), b.addr(recv), b.addr(c.Scratch)}, shape...)
	args = append(args, sig, b.userSeq, uint64(b.rank), uint64(n))
	if c.Op == ops.Broadcast {
		args = append(args, uint64(c.Root))
	}
	return b.launch(st, impl.Name, kernel, sh, sh.Blocks, args...)
}

// userTable is a rank's routing tables for a user's dispatch or combine in device
// memory (kernels.Signatures, moeParams): slots (tokens x n int32, -1 where a token
// does not go), then origin (a pair of int32 per received copy: its rank and token).
type userTable struct {
	blocks               []backend.Block // the routing's, kept so that the key's address stays its own
	mem                  uint64
	tokens, slots, token int64 // tokens per rank, copies this rank receives, bytes per token
	err                  error // a refusal, the same on every rank
}

// userKey names a table: the routing by the address of its first block (routings are
// never changed once made), its length, and the token buffer's size.
type userKey struct {
	op     string
	first  *backend.Block
	blocks int
	bytes  int64
}

// userMoETable returns c's tables for this rank, made and uploaded on first use.
func (b *Backend) userMoETable(c backend.Collective) (*userTable, error) {
	key := userKey{op: string(c.Op), blocks: len(c.Blocks), bytes: c.Bytes}
	if len(c.Blocks) > 0 {
		key.first = &c.Blocks[0]
	}
	if t, ok := b.users[key]; ok {
		return t, t.err
	}
	t := &userTable{blocks: c.Blocks}
	words, err := userMoEWords(c, b.rank, b.size, t)
	if err != nil {
		t.err = err
	} else if t.mem, err = b.uploadBytes(string(c.Op), words); err != nil {
		return nil, err // not kept: the next call tries again
	}
	if b.users == nil {
		b.users = map[userKey]*userTable{}
	}
	b.users[key] = t
	return t, t.err
}

// userMoEWords lays out rank me's tables for c's blocks (dispatch: the routing's
// Dispatch, token t of rank s to slot j of rank d; combine: its Combine, the same
// copies the other way), filling in t's counts. Blocks that are not whole tokens of
// the token buffer, name a rank outside the job, send a token to one rank twice or
// two copies to one slot are refused, on every rank alike (every rank checks every
// block): no routing of coll.Route has them.
func userMoEWords(c backend.Collective, me, n int, t *userTable) ([]byte, error) {
	if len(c.Blocks) == 0 {
		return nil, fmt.Errorf("%s: no routing", c.Op)
	}
	tok := c.Blocks[0].Bytes
	if tok <= 0 || c.Bytes%tok != 0 {
		return nil, fmt.Errorf("%s: a %d-byte token buffer is no whole number of %d-byte tokens", c.Op, c.Bytes, tok)
	}
	t.token, t.tokens = tok, c.Bytes/tok
	// Seen from the token's owner s: its token t has its copy on rank d at slot j.
	type copyOf struct {
		s, d    int
		t, slot int64
	}
	type sent struct {
		s, d int
		t    int64
	}
	type place struct {
		d    int
		slot int64
	}
	seen, taken := map[sent]bool{}, map[place]bool{}
	copies := make([]copyOf, 0, len(c.Blocks))
	for _, blk := range c.Blocks {
		if blk.Bytes != tok || blk.SrcOff < 0 || blk.DstOff < 0 || blk.SrcOff%tok != 0 || blk.DstOff%tok != 0 {
			return nil, fmt.Errorf("%s: a block of %d bytes at %d -> %d is not one %d-byte token", c.Op, blk.Bytes, blk.SrcOff, blk.DstOff, tok)
		}
		if blk.Src < 0 || blk.Src >= n || blk.Dst < 0 || blk.Dst >= n {
			return nil, fmt.Errorf("%s: a block from rank %d to rank %d, in a job of ranks 0..%d", c.Op, blk.Src, blk.Dst, n-1)
		}
		cp := copyOf{s: blk.Src, d: blk.Dst, t: blk.SrcOff / tok, slot: blk.DstOff / tok}
		if c.Op == ops.Combine {
			cp = copyOf{s: blk.Dst, d: blk.Src, t: blk.DstOff / tok, slot: blk.SrcOff / tok}
		}
		if cp.t >= t.tokens {
			return nil, fmt.Errorf("%s: token %d of rank %d is past the %d tokens", c.Op, cp.t, cp.s, t.tokens)
		}
		if seen[sent{cp.s, cp.d, cp.t}] {
			return nil, fmt.Errorf("%s: token %d of rank %d goes to rank %d twice", c.Op, cp.t, cp.s, cp.d)
		}
		if taken[place{cp.d, cp.slot}] {
			return nil, fmt.Errorf("%s: two copies go to slot %d of rank %d", c.Op, cp.slot, cp.d)
		}
		seen[sent{cp.s, cp.d, cp.t}], taken[place{cp.d, cp.slot}] = true, true
		copies = append(copies, cp)
	}
	for _, cp := range copies {
		if cp.d == me {
			t.slots = max(t.slots, cp.slot+1)
		}
	}
	words := make([]int32, t.tokens*int64(n)+2*t.slots)
	slots, origin := words[:t.tokens*int64(n)], words[t.tokens*int64(n):]
	for i := range words {
		words[i] = -1
	}
	for _, cp := range copies {
		if cp.s == me {
			slots[cp.t*int64(n)+int64(cp.d)] = int32(cp.slot)
		}
		if cp.d == me {
			origin[2*cp.slot], origin[2*cp.slot+1] = int32(cp.s), int32(cp.t)
		}
	}
	out := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(w))
	}
	return out, nil
}
