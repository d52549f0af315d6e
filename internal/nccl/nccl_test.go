package nccl

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenReadsVersion(t *testing.T) {
	f := openFake(t)
	if v := f.Version(); v != (Version{2, 27, 3}) || v.String() != "2.27.3" {
		t.Errorf("Version() = %v, want 2.27.3 (the fake's 22703)", v)
	}
	if f.Path != fakes[""] {
		t.Errorf("Path = %q, want %q", f.Path, fakes[""])
	}
}

func TestDecodeVersion(t *testing.T) {
	for code, want := range map[int]string{2804: "2.8.4", 2708: "2.7.8", 20903: "2.9.3", 21903: "2.19.3", 22703: "2.27.3", 30001: "3.0.1"} {
		if got := DecodeVersion(code).String(); got != want {
			t.Errorf("DecodeVersion(%d) = %s, want %s", code, got, want)
		}
	}
}

// idSum is the fake's checksum of a unique ID.
func idSum(id UniqueID) string {
	var s uint32
	for _, b := range id {
		s = s*31 + uint32(b)
	}
	return fmt.Sprintf("%02x%02x%02x%02x..%02x%02x%02x%02x sum=%08x", id[0], id[1], id[2], id[3], id[124], id[125], id[126], id[127], s)
}

// The 128-byte ID crosses by value in both directions, and the ints around it in
// ncclCommInitRank keep their places.
func TestUniqueIDAndInitRankABI(t *testing.T) {
	f := openFake(t)
	id, err := f.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range id {
		if b != byte(i*7+3) {
			t.Fatalf("UniqueID byte %d = %#x, want %#x (the fake's pattern): ncclGetUniqueId's out pointer is wrong", i, b, byte(i*7+3))
		}
	}
	// Every byte distinct from the fake's pattern, so a shifted or truncated copy shows.
	for i := range id {
		id[i] = byte(255 - i)
	}
	c, err := f.InitRank(4, id, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := f.calls()
	want := fmt.Sprintf("ncclCommInitRank(nranks=4, id=%s, rank=2)", idSum(id))
	if len(got) != 2 || got[0] != "ncclGetUniqueId" || !strings.HasPrefix(got[1], want) {
		t.Fatalf("calls:\n%s\nwant ncclGetUniqueId, then %s", strings.Join(got, "\n"), want)
	}
	if c.Rank() != 2 || c.Size() != 4 || c.Handle() == 0 {
		t.Errorf("comm rank %d size %d handle %#x", c.Rank(), c.Size(), c.Handle())
	}
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); len(got) != 1 || got[0] != "ncclCommDestroy(2/4)" {
		t.Errorf("Destroy logged %q, want ncclCommDestroy(2/4): the handle did not come back intact", got)
	}
}

func initComm(t *testing.T, f *fake, nranks, rank int) *Comm {
	t.Helper()
	c, err := f.InitRank(nranks, UniqueID{1, 2, 3}, rank)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	f.calls()
	return c
}

// Every collective's arguments arrive where nccl.h declares them, with distinct values
// so that two swapped arguments show, and counts over 4G so that a size_t bound
// narrower than 64 bits shows.
func TestCollectivesABI(t *testing.T) {
	f := openFake(t)
	c := initComm(t, f, 4, 1)
	const send, recv, stream = 0x1000, 0x2000, 0x5000
	for _, tc := range []struct {
		call func() error
		want string
	}{
		{func() error { return c.AllReduce(send, recv, 1<<33+5, BFloat16, Avg, stream) },
			"ncclAllReduce(send=0x1000, recv=0x2000, count=8589934597, dt=9, op=4, comm=1/4, stream=0x5000)"},
		{func() error { return c.AllReduce(send, recv, 3, Float32, Max, stream) },
			"ncclAllReduce(send=0x1000, recv=0x2000, count=3, dt=7, op=2, comm=1/4, stream=0x5000)"},
		{func() error { return c.AllGather(send, recv, 1<<33+17, Float16, stream) },
			"ncclAllGather(send=0x1000, recv=0x2000, sendcount=8589934609, dt=6, comm=1/4, stream=0x5000)"},
		{func() error { return c.ReduceScatter(send, recv, 1<<33+19, Int64, Min, stream) },
			"ncclReduceScatter(send=0x1000, recv=0x2000, recvcount=8589934611, dt=4, op=3, comm=1/4, stream=0x5000)"},
		{func() error { return c.Broadcast(send, recv, 1<<33+23, Uint8, 3, stream) },
			"ncclBroadcast(send=0x1000, recv=0x2000, count=8589934615, dt=1, root=3, comm=1/4, stream=0x5000)"},
		{func() error { return c.Reduce(send, recv, 1<<33+37, Float64, Prod, 2, stream) },
			"ncclReduce(send=0x1000, recv=0x2000, count=8589934629, dt=8, op=1, root=2, comm=1/4, stream=0x5000)"},
		{func() error { return c.Send(send, 1<<33+29, Int32, 2, stream) },
			"ncclSend(send=0x1000, count=8589934621, dt=2, peer=2, comm=1/4, stream=0x5000)"},
		{func() error { return c.Recv(recv, 1<<33+31, Float64, 0, stream) },
			"ncclRecv(recv=0x2000, count=8589934623, dt=8, peer=0, comm=1/4, stream=0x5000)"},
	} {
		if err := tc.call(); err != nil {
			t.Errorf("%s: %v", tc.want, err)
		}
		if got := f.calls(); len(got) != 1 || got[0] != tc.want {
			t.Errorf("logged %q\nwant    %q", got, tc.want)
		}
	}
}

// All-to-all is one group of a send and a receive per rank, this one included, block
// p of each buffer for rank p (nccl-tests' alltoall).
func TestAllToAll(t *testing.T) {
	f := openFake(t)
	c := initComm(t, f, 3, 0)
	if err := c.AllToAll(0x1000, 0x2000, 4, BFloat16, 0x77); err != nil {
		t.Fatal(err)
	}
	want := []string{"ncclGroupStart"}
	for p := 0; p < 3; p++ {
		want = append(want,
			fmt.Sprintf("ncclSend(send=%#x, count=4, dt=9, peer=%d, comm=0/3, stream=0x77)", 0x1000+8*p, p),
			fmt.Sprintf("ncclRecv(recv=%#x, count=4, dt=9, peer=%d, comm=0/3, stream=0x77)", 0x2000+8*p, p))
	}
	want = append(want, "ncclGroupEnd")
	if got := f.calls(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A failed send still closes the group.
	err := c.AllToAll(0x1000, 0x2000, 0xbad, Int8, 0)
	if !errors.Is(err, InvalidUsage) {
		t.Errorf("err = %v, want ncclInvalidUsage", err)
	}
	if got := f.calls(); got[len(got)-1] != "ncclGroupEnd" {
		t.Errorf("a failed all-to-all left the group open: %q", got)
	}
}

// Gather is one group: every rank's send to the root, and on the root a receive from
// every rank (itself included) into block r of recv (nccl-tests' gather); a rank
// other than the root receives nothing.
func TestGather(t *testing.T) {
	f := openFake(t)
	for _, tc := range []struct {
		rank int
		want []string
	}{
		{2, []string{"ncclGroupStart",
			"ncclSend(send=0x1000, count=4, dt=9, peer=2, comm=2/3, stream=0x77)",
			"ncclRecv(recv=0x2000, count=4, dt=9, peer=0, comm=2/3, stream=0x77)",
			"ncclRecv(recv=0x2008, count=4, dt=9, peer=1, comm=2/3, stream=0x77)",
			"ncclRecv(recv=0x2010, count=4, dt=9, peer=2, comm=2/3, stream=0x77)",
			"ncclGroupEnd"}},
		{0, []string{"ncclGroupStart",
			"ncclSend(send=0x1000, count=4, dt=9, peer=2, comm=0/3, stream=0x77)",
			"ncclGroupEnd"}},
	} {
		c := initComm(t, f, 3, tc.rank)
		if err := c.Gather(0x1000, 0x2000, 4, BFloat16, 2, 0x77); err != nil {
			t.Fatal(err)
		}
		if got := f.calls(); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("rank %d: calls:\n%s\nwant:\n%s", tc.rank, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
	// A failed call still closes the group.
	c := initComm(t, f, 3, 2)
	if err := c.Gather(0x1000, 0x2000, 0xbad, Int8, 2, 0); !errors.Is(err, InvalidUsage) {
		t.Errorf("err = %v, want ncclInvalidUsage", err)
	}
	if got := f.calls(); got[len(got)-1] != "ncclGroupEnd" {
		t.Errorf("a failed gather left the group open: %q", got)
	}
}

// Scatter is one group: on the root a send of block r of send to every rank r (itself
// included), and on every rank a receive from the root (nccl-tests' scatter).
func TestScatter(t *testing.T) {
	f := openFake(t)
	for _, tc := range []struct {
		rank int
		want []string
	}{
		{2, []string{"ncclGroupStart",
			"ncclSend(send=0x1000, count=4, dt=9, peer=0, comm=2/3, stream=0x77)",
			"ncclSend(send=0x1008, count=4, dt=9, peer=1, comm=2/3, stream=0x77)",
			"ncclSend(send=0x1010, count=4, dt=9, peer=2, comm=2/3, stream=0x77)",
			"ncclRecv(recv=0x2000, count=4, dt=9, peer=2, comm=2/3, stream=0x77)",
			"ncclGroupEnd"}},
		{0, []string{"ncclGroupStart",
			"ncclRecv(recv=0x2000, count=4, dt=9, peer=2, comm=0/3, stream=0x77)",
			"ncclGroupEnd"}},
	} {
		c := initComm(t, f, 3, tc.rank)
		if err := c.Scatter(0x1000, 0x2000, 4, BFloat16, 2, 0x77); err != nil {
			t.Fatal(err)
		}
		if got := f.calls(); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("rank %d: calls:\n%s\nwant:\n%s", tc.rank, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
	// A failed call still closes the group.
	c := initComm(t, f, 3, 0)
	if err := c.Scatter(0x1000, 0x2000, 0xbad, Int8, 2, 0); !errors.Is(err, InvalidUsage) {
		t.Errorf("err = %v, want ncclInvalidUsage", err)
	}
	if got := f.calls(); got[len(got)-1] != "ncclGroupEnd" {
		t.Errorf("a failed scatter left the group open: %q", got)
	}
}

// A result code comes back as a named error with NCCL's two texts.
func TestErrors(t *testing.T) {
	f := openFake(t)
	c := initComm(t, f, 2, 0)
	err := c.AllReduce(1, 2, 0xbad, Float32, Sum, 0)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, InvalidUsage) || errors.Is(err, InvalidArgument) {
		t.Fatalf("err = %#v, want an *Error that is InvalidUsage only", err)
	}
	for _, want := range []string{"ncclAllReduce", "ncclInvalidUsage (5)", "invalid usage (run with NCCL_DEBUG=WARN for details)", "ncclAllReduce: count 0xbad refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if got := c.LastError(); got != "ncclAllReduce: count 0xbad refused" {
		t.Errorf("LastError() = %q", got)
	}
	f.calls()
	if _, err := f.InitRank(2, UniqueID{}, 2); err == nil || !strings.Contains(err.Error(), "rank 2 of 2") {
		t.Errorf("InitRank(rank 2 of 2) = %v, want an out-of-range error", err)
	}
	if Result(42).String() != "ncclResult(42)" || RemoteError.Error() != "ncclRemoteError" {
		t.Errorf("names: %s, %s", Result(42), RemoteError)
	}
	if err := c.AllReduce(1, 2, 8, DataType(99), Sum, 0); err == nil {
		t.Error("an unknown data type went through")
	}
	if err := c.Abort(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); len(got) != 1 || got[0] != "ncclCommAbort(0/2)" {
		t.Errorf("Abort logged %q", got)
	}
	if err := c.Send(1, 1, Int8, 1, 0); !errors.Is(err, errDestroyed) {
		t.Errorf("Send after Abort: %v", err)
	}
	if got := f.calls(); got != nil {
		t.Errorf("a call reached NCCL after Abort: %q", got)
	}
}

func TestMissingSymbolNamed(t *testing.T) {
	if noFake != "" {
		t.Skip(noFake)
	}
	_, err := Open(fakes["nosend"])
	if err == nil || !strings.Contains(err.Error(), "does not export ncclSend") || !strings.Contains(err.Error(), fakes["nosend"]) {
		t.Fatalf("Open of a library without ncclSend: %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), LibName)); err == nil || !strings.Contains(err.Error(), "dlopen") {
		t.Errorf("Open of a missing file: %v", err)
	}
}

// NCCL_NVLS_ENABLE=0 reaches NCCL's getenv unless the user set it.
func TestNVLSDefault(t *testing.T) {
	f := openFake(t)
	t.Setenv("NCCL_NVLS_ENABLE", "") // restored after the test
	os.Unsetenv("NCCL_NVLS_ENABLE")
	for _, tc := range []struct {
		user string // "-" unset
		want string
	}{{"-", "NCCL_NVLS_ENABLE=0"}, {"1", "NCCL_NVLS_ENABLE=1"}, {"", "NCCL_NVLS_ENABLE="}} {
		if tc.user == "-" {
			os.Unsetenv("NCCL_NVLS_ENABLE")
		} else {
			os.Setenv("NCCL_NVLS_ENABLE", tc.user)
		}
		c, err := f.InitRank(2, UniqueID{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		c.Destroy()
		if got := f.calls(); len(got) == 0 || !strings.HasSuffix(got[0], " "+tc.want) {
			t.Errorf("user %q: NCCL saw %q, want %s", tc.user, got, tc.want)
		}
	}
	os.Unsetenv("NCCL_NVLS_ENABLE")
	if set := ApplyEnvDefaults(); len(set) != 1 || set[0] != "NCCL_NVLS_ENABLE=0" {
		t.Errorf("ApplyEnvDefaults() = %q", set)
	}
	if set := ApplyEnvDefaults(); len(set) != 0 {
		t.Errorf("a second ApplyEnvDefaults() set %q again", set)
	}
}

// Opened by its bare soname, the library reports the file the loader chose.
func TestOpenBareSoname(t *testing.T) {
	if noFake != "" {
		t.Skip(noFake)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"=1", "LD_LIBRARY_PATH="+filepath.Dir(fakes[""]))
	out, err := cmd.CombinedOutput()
	if want := fmt.Sprintf("path=%s version=2.27.3\n", fakes[""]); err != nil || string(out) != want {
		t.Errorf("helper: %v\n%s\nwant %s", err, out, want)
	}
}

func TestDataTypes(t *testing.T) {
	for name, want := range map[string]DataType{"bf16": BFloat16, "float32": Float32, "float16": Float16, "int8": Int8, "uint8": Uint8,
		"int32": Int32, "int64": Int64, "float64": Float64} {
		got, err := DataTypeOf(name)
		if err != nil || got != want || got.String() != name {
			t.Errorf("DataTypeOf(%q) = %v, %v", name, got, err)
		}
	}
	if _, err := DataTypeOf("int16"); err == nil {
		t.Error("int16 mapped to an NCCL type; NCCL has none")
	}
	for _, tc := range []struct {
		dt   DataType
		size int
	}{{BFloat16, 2}, {Float32, 4}, {Int64, 8}, {Int8, 1}, {Float8E4, 1}, {DataType(12), 0}} {
		if tc.dt.Size() != tc.size {
			t.Errorf("%v.Size() = %d, want %d", tc.dt, tc.dt.Size(), tc.size)
		}
	}
}
