package nccl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/symmem/symmem/internal/dl"
)

// Result is ncclResult_t. Every value but Success is an error, so that errors.Is(err,
// nccl.InvalidArgument) asks what NCCL said.
type Result int32

// ncclResult_t values (nccl.h).
const (
	Success            Result = 0
	UnhandledCUDAError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
)

var resultNames = [...]string{"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
	"ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress"}

// String is the enumerator's name in nccl.h.
func (r Result) String() string {
	if r >= 0 && int(r) < len(resultNames) {
		return resultNames[r]
	}
	return fmt.Sprintf("ncclResult(%d)", int32(r))
}

// Error makes a Result an error.
func (r Result) Error() string { return r.String() }

// Error is a failed NCCL call: the call, NCCL's result and its texts.
type Error struct {
	Call string
	Code Result
	Text string // ncclGetErrorString
	Last string // ncclGetLastError: NCCL's description of the latest failure, often the useful part
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %s (%d): %s", e.Call, e.Code, int32(e.Code), e.Text)
	if e.Last != "" && !strings.Contains(e.Text, e.Last) {
		msg += ": " + e.Last
	}
	return msg
}

// Unwrap lets errors.Is match the Result.
func (e *Error) Unwrap() error { return e.Code }

// DataType is ncclDataType_t.
type DataType int32

// ncclDataType_t values (nccl.h; bfloat16 since NCCL 2.10, the float8 types since 2.24).
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	BFloat16 DataType = 9
	Float8E4 DataType = 10 // ncclFloat8e4m3
	Float8E5 DataType = 11 // ncclFloat8e5m2
)

var dataTypes = [...]struct {
	name string
	size int
}{{"int8", 1}, {"uint8", 1}, {"int32", 4}, {"uint32", 4}, {"int64", 8}, {"uint64", 8},
	{"float16", 2}, {"float32", 4}, {"float64", 8}, {"bf16", 2}, {"float8e4m3", 1}, {"float8e5m2", 1}}

// Size is the element size in bytes (0 for an unknown type).
func (t DataType) Size() int {
	if t >= 0 && int(t) < len(dataTypes) {
		return dataTypes[t].size
	}
	return 0
}

// String is the type's name as symmem's --dtype spells it.
func (t DataType) String() string {
	if t >= 0 && int(t) < len(dataTypes) {
		return dataTypes[t].name
	}
	return fmt.Sprintf("ncclDataType(%d)", int32(t))
}

// DataTypeOf maps symmem's --dtype names to NCCL's types; int16 has none.
func DataTypeOf(name string) (DataType, error) {
	for i, d := range dataTypes {
		if d.name == name {
			return DataType(i), nil
		}
	}
	return 0, fmt.Errorf("NCCL has no element type %q", name)
}

// RedOp is ncclRedOp_t.
type RedOp int32

// ncclRedOp_t values (nccl.h; Avg since NCCL 2.10).
const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	Avg  RedOp = 4
)

// Version is NCCL's release.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// DecodeVersion reads ncclGetVersion's integer: NCCL_VERSION(X,Y,Z) is X*1000+Y*100+Z
// up to 2.8 and X*10000+Y*100+Z from 2.9 on.
func DecodeVersion(code int) Version {
	if code >= 10000 {
		return Version{code / 10000, code % 10000 / 100, code % 100}
	}
	return Version{code / 1000, code % 1000 / 100, code % 100}
}

// IDBytes is NCCL_UNIQUE_ID_BYTES.
const IDBytes = 128

// UniqueID is ncclUniqueId's contents: opaque bytes rank 0 makes and every rank passes
// to InitRank.
type UniqueID [IDBytes]byte

// cUniqueID is ncclUniqueId as purego passes it by value: a struct (a bare array is
// not one to purego), laid out as struct { char internal[128]; }.
type cUniqueID struct{ Internal [IDBytes]byte }

// Lib is an opened libnccl.
type Lib struct {
	Path    string // as opened; for a bare soname, the file the loader chose when it can tell
	version Version

	getVersion     func(v *int32) Result
	getUniqueID    func(id *cUniqueID) Result
	commInitRank   func(comm *uintptr, nranks int32, id cUniqueID, rank int32) Result
	commDestroy    func(comm uintptr) Result
	commAbort      func(comm uintptr) Result
	getErrorString func(r Result) *byte
	getLastError   func(comm uintptr) *byte
	allReduce      func(send, recv uintptr, count uint64, dt DataType, op RedOp, comm, stream uintptr) Result
	allGather      func(send, recv uintptr, sendCount uint64, dt DataType, comm, stream uintptr) Result
	reduceScatter  func(send, recv uintptr, recvCount uint64, dt DataType, op RedOp, comm, stream uintptr) Result
	broadcast      func(send, recv uintptr, count uint64, dt DataType, root int32, comm, stream uintptr) Result
	reduce         func(send, recv uintptr, count uint64, dt DataType, op RedOp, root int32, comm, stream uintptr) Result
	send           func(buf uintptr, count uint64, dt DataType, peer int32, comm, stream uintptr) Result
	recv           func(buf uintptr, count uint64, dt DataType, peer int32, comm, stream uintptr) Result
	groupStart     func() Result
	groupEnd       func() Result

	win windowFns // symmetric windows (2.27+), bound where the library has them
	dev deviceFns // the device API (2.28+), likewise
}

// Open loads the library at path (a file, or the bare soname for the dynamic loader)
// and reads its version. A symbol it lacks is an error naming the symbol.
func Open(path string) (*Lib, error) {
	lib, err := dl.Open(path)
	if err != nil {
		return nil, err
	}
	l := &Lib{Path: lib.Path} // for a bare soname, the file the loader chose
	b := func(fn any, name string) dl.Binding { return dl.Binding{Fn: fn, Names: []string{name}} }
	if err := lib.BindAll([]dl.Binding{
		b(&l.getVersion, "ncclGetVersion"),
		b(&l.getUniqueID, "ncclGetUniqueId"),
		b(&l.commInitRank, "ncclCommInitRank"),
		b(&l.commDestroy, "ncclCommDestroy"),
		b(&l.commAbort, "ncclCommAbort"),
		b(&l.getErrorString, "ncclGetErrorString"),
		b(&l.getLastError, "ncclGetLastError"),
		b(&l.allReduce, "ncclAllReduce"),
		b(&l.allGather, "ncclAllGather"),
		b(&l.reduceScatter, "ncclReduceScatter"),
		b(&l.broadcast, "ncclBroadcast"),
		b(&l.reduce, "ncclReduce"),
		b(&l.send, "ncclSend"),
		b(&l.recv, "ncclRecv"),
		b(&l.groupStart, "ncclGroupStart"),
		b(&l.groupEnd, "ncclGroupEnd"),
	}); err != nil {
		return nil, fmt.Errorf("%w (NCCL 2.13 or newer has every function symmem calls)", err)
	}
	l.win.bind(lib)
	l.dev.bind(lib)
	var code int32
	if r := l.getVersion(&code); r != Success {
		return nil, l.err("ncclGetVersion", r, 0)
	}
	l.version = DecodeVersion(int(code))
	return l, nil
}

// Version is the library's release.
func (l *Lib) Version() Version { return l.version }

// err turns a failed call into an *Error with NCCL's texts; comm may be 0.
func (l *Lib) err(call string, r Result, comm uintptr) error {
	return &Error{Call: call, Code: r, Text: dl.GoString(l.getErrorString(r)), Last: dl.GoString(l.getLastError(comm))}
}

// check returns nil for Success, else err.
func (l *Lib) check(call string, r Result, comm uintptr) error {
	if r == Success {
		return nil
	}
	return l.err(call, r, comm)
}

// UniqueID makes a communicator's unique ID (rank 0 does this and shares it). It sets
// EnvDefaults first: this is the first call that initialises NCCL.
func (l *Lib) UniqueID() (UniqueID, error) {
	ApplyEnvDefaults()
	var id cUniqueID
	if err := l.check("ncclGetUniqueId", l.getUniqueID(&id), 0); err != nil {
		return UniqueID{}, err
	}
	return id.Internal, nil
}

// Comm is one rank's communicator.
type Comm struct {
	lib          *Lib
	h            uintptr
	rank, nranks int
}

// InitRank joins the communicator id names as rank of nranks; it returns once every
// rank has joined. The rank's CUDA context must be current on the calling thread.
func (l *Lib) InitRank(nranks int, id UniqueID, rank int) (*Comm, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("ncclCommInitRank: rank %d of %d ranks is out of range", rank, nranks)
	}
	ApplyEnvDefaults()
	var h uintptr
	if r := l.commInitRank(&h, int32(nranks), cUniqueID{id}, int32(rank)); r != Success {
		return nil, fmt.Errorf("rank %d of %d: %w (set NCCL_DEBUG=WARN for NCCL's own log)", rank, nranks, l.err("ncclCommInitRank", r, 0))
	}
	return &Comm{lib: l, h: h, rank: rank, nranks: nranks}, nil
}

// Rank is this communicator's rank.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.nranks }

// Handle is the ncclComm_t, for calls the package does not wrap.
func (c *Comm) Handle() uintptr { return c.h }

// Destroy frees the communicator after its operations completed.
func (c *Comm) Destroy() error {
	if c.h == 0 {
		return nil
	}
	err := c.lib.check("ncclCommDestroy", c.lib.commDestroy(c.h), c.h)
	c.h = 0
	return err
}

// Abort frees the communicator and stops its operations in flight: the way out when a
// peer died and a collective will never complete.
func (c *Comm) Abort() error {
	if c.h == 0 {
		return nil
	}
	err := c.lib.check("ncclCommAbort", c.lib.commAbort(c.h), c.h)
	c.h = 0
	return err
}

// LastError is NCCL's description of this communicator's latest failure.
func (c *Comm) LastError() string { return dl.GoString(c.lib.getLastError(c.h)) }

var errDestroyed = errors.New("the NCCL communicator was destroyed")

// valid checks what every collective needs before NCCL sees it.
func (c *Comm) valid(name string, count int, dt DataType) error {
	switch {
	case c.h == 0:
		return fmt.Errorf("%s: %w", name, errDestroyed)
	case count < 0:
		return fmt.Errorf("%s: negative count %d", name, count)
	case dt.Size() == 0:
		return fmt.Errorf("%s: unknown data type %d", name, int32(dt))
	}
	return nil
}

// call runs a collective f once valid, and turns its result into an error.
func (c *Comm) call(name string, count int, dt DataType, f func() Result) error {
	if err := c.valid(name, count, dt); err != nil {
		return err
	}
	return c.lib.check(name, f(), c.h)
}

// AllReduce reduces count elements of send over every rank into recv on every rank.
func (c *Comm) AllReduce(send, recv uintptr, count int, dt DataType, op RedOp, stream uintptr) error {
	return c.call("ncclAllReduce", count, dt, func() Result {
		return c.lib.allReduce(send, recv, uint64(count), dt, op, c.h, stream)
	})
}

// AllGather gathers sendCount elements from every rank into recv (Size()*sendCount
// elements, rank r's at r*sendCount).
func (c *Comm) AllGather(send, recv uintptr, sendCount int, dt DataType, stream uintptr) error {
	return c.call("ncclAllGather", sendCount, dt, func() Result {
		return c.lib.allGather(send, recv, uint64(sendCount), dt, c.h, stream)
	})
}

// ReduceScatter reduces Size()*recvCount elements of send over every rank and leaves
// block r (recvCount elements) on rank r.
func (c *Comm) ReduceScatter(send, recv uintptr, recvCount int, dt DataType, op RedOp, stream uintptr) error {
	return c.call("ncclReduceScatter", recvCount, dt, func() Result {
		return c.lib.reduceScatter(send, recv, uint64(recvCount), dt, op, c.h, stream)
	})
}

// Broadcast copies count elements of root's send into recv on every rank.
func (c *Comm) Broadcast(send, recv uintptr, count int, dt DataType, root int, stream uintptr) error {
	return c.call("ncclBroadcast", count, dt, func() Result {
		return c.lib.broadcast(send, recv, uint64(count), dt, int32(root), c.h, stream)
	})
}

// Reduce reduces count elements of send over every rank into recv on root. NCCL writes
// no other rank's recv.
func (c *Comm) Reduce(send, recv uintptr, count int, dt DataType, op RedOp, root int, stream uintptr) error {
	return c.call("ncclReduce", count, dt, func() Result {
		return c.lib.reduce(send, recv, uint64(count), dt, op, int32(root), c.h, stream)
	})
}

// Send sends count elements to peer, which must call Recv.
func (c *Comm) Send(send uintptr, count int, dt DataType, peer int, stream uintptr) error {
	return c.call("ncclSend", count, dt, func() Result {
		return c.lib.send(send, uint64(count), dt, int32(peer), c.h, stream)
	})
}

// Recv receives count elements from peer.
func (c *Comm) Recv(recv uintptr, count int, dt DataType, peer int, stream uintptr) error {
	return c.call("ncclRecv", count, dt, func() Result {
		return c.lib.recv(recv, uint64(count), dt, int32(peer), c.h, stream)
	})
}

// GroupStart opens a group: the operations up to GroupEnd are issued as one.
func (l *Lib) GroupStart() error { return l.check("ncclGroupStart", l.groupStart(), 0) }

// GroupEnd closes a group and issues its operations.
func (l *Lib) GroupEnd() error { return l.check("ncclGroupEnd", l.groupEnd(), 0) }

// AllToAll sends block p of send (count elements) to rank p and receives rank p's
// block into block p of recv, for every p including this rank: grouped send/recv, as
// nccl-tests' alltoall does. send and recv hold Size()*count elements.
func (c *Comm) AllToAll(send, recv uintptr, count int, dt DataType, stream uintptr) error {
	return c.group("all-to-all", count, dt, func() error {
		block := uintptr(count * dt.Size())
		for p := 0; p < c.nranks; p++ {
			off := uintptr(p) * block
			if err := c.Send(send+off, count, dt, p, stream); err != nil {
				return err
			}
			if err := c.Recv(recv+off, count, dt, p, stream); err != nil {
				return err
			}
		}
		return nil
	})
}

// Gather sends count elements of send to root, which receives rank r's into block r of
// recv (Size()*count elements; no other rank's recv is touched): grouped send/recv, as
// nccl-tests' gather does, the root sending to itself too.
func (c *Comm) Gather(send, recv uintptr, count int, dt DataType, root int, stream uintptr) error {
	return c.group("gather", count, dt, func() error {
		if err := c.Send(send, count, dt, root, stream); err != nil || c.rank != root {
			return err
		}
		block := uintptr(count * dt.Size())
		for r := 0; r < c.nranks; r++ {
			if err := c.Recv(recv+uintptr(r)*block, count, dt, r, stream); err != nil {
				return err
			}
		}
		return nil
	})
}

// Scatter sends block r of root's send (count elements of Size()*count) to rank r,
// the root included, which receives it into recv (count elements): grouped send/recv,
// as nccl-tests' scatter does.
func (c *Comm) Scatter(send, recv uintptr, count int, dt DataType, root int, stream uintptr) error {
	return c.group("scatter", count, dt, func() error {
		if c.rank == root {
			block := uintptr(count * dt.Size())
			for r := 0; r < c.nranks; r++ {
				if err := c.Send(send+uintptr(r)*block, count, dt, r, stream); err != nil {
					return err
				}
			}
		}
		return c.Recv(recv, count, dt, root, stream)
	})
}

// group runs calls, the sends and receives of a collective named name, inside one
// group, closed even after a failed call: an open group would swallow the caller's
// next operations.
func (c *Comm) group(name string, count int, dt DataType, calls func() error) error {
	if err := c.valid(name, count, dt); err != nil {
		return err
	}
	if err := c.lib.GroupStart(); err != nil {
		return err
	}
	first := calls()
	if err := c.lib.GroupEnd(); first == nil {
		first = err
	}
	return first
}
