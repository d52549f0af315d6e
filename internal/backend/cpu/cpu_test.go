package cpu

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend"
)

// A heap larger than its file system's room is refused when it is made: made sparse, it
// killed the first rank to touch a page past the room with SIGBUS and a stack trace.
func TestCreateRefusesAHeapWithoutRoom(t *testing.T) {
	ShmDir = t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(ShmDir, &st); err != nil {
		t.Skip(err)
	}
	free := int64(st.Bavail) * st.Bsize
	path := HeapPath("big")
	err := Create(path, 2, free/2)
	if err == nil || !strings.Contains(err.Error(), "free: run fewer ranks or smaller sizes, or make room there (df -h "+ShmDir+")") {
		t.Fatalf("Create of 2 ranks x half the room = %v, want a refusal naming the room", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused heap was made: %v", err)
	}
	if err := Create(path, 2, 1<<16); err != nil {
		t.Fatal(err)
	}
}

// The heap's pages are taken when it is made, not when a rank first touches them: a
// sparse heap passed the free-space check, and a /dev/shm that filled during the run
// killed a rank with SIGBUS. Checked where the heaps live (tmpfs), or a temporary
// directory where there is no /dev/shm.
func TestCreateReservesTheHeap(t *testing.T) {
	ShmDir = t.TempDir()
	if d, err := os.MkdirTemp("/dev/shm", "symmemtest-"); err == nil {
		ShmDir = d
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	path := HeapPath("reserved")
	const heap = 4 << 20
	if err := Create(path, 2, heap); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if want := int64(2 * heap); st.Blocks*512 < want {
		t.Fatalf("heap of %d bytes has %d allocated: sparse, a full %s would kill a rank that touches it", st.Size, st.Blocks*512, ShmDir)
	}
}

// A heap directory that cannot take the file says what it must be.
func TestCreateWhereNoFileCanBeMade(t *testing.T) {
	ShmDir = filepath.Join(t.TempDir(), "missing")
	err := Create(HeapPath("t"), 2, 1<<16)
	if err == nil || !strings.HasSuffix(err.Error(), ": it must be a directory this user can write, with room (df -h "+ShmDir+")") {
		t.Fatalf("Create in a missing directory = %v", err)
	}
}

// Two ranks in one process, each with its own mapping of the same file.
func TestPutGetSignalBarrier(t *testing.T) {
	ShmDir = t.TempDir()
	path := HeapPath("t")
	if err := Create(path, 2, 1<<16); err != nil {
		t.Fatal(err)
	}
	var ranks [2]*Backend
	for r := range ranks {
		b, err := Open(path, r, 2, 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		ranks[r] = b
	}
	var bufs [2][3]backend.Buffer
	for r, b := range ranks {
		for i, n := range []int64{1000, 1000, 8} {
			buf, err := b.Alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			bufs[r][i] = buf
		}
	}
	if bufs[0] != bufs[1] {
		t.Fatal("the heap is not carved alike on both ranks")
	}
	src, dst, sig := bufs[0][0], bufs[0][1], bufs[0][2]
	data := bytes.Repeat([]byte("symmem!"), 143)[:1000]
	ranks[0].Write(src, data)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // rank 1 waits for the signal, then reads
		defer wg.Done()
		ranks[1].WaitSignal(sig, 1000, 1, backend.Launch{})
		got := make([]byte, 1000)
		ranks[1].Read(dst, got)
		if !bytes.Equal(got, data) {
			t.Error("put-signal: data not there after the signal")
		}
		ranks[1].Barrier()
	}()
	go func() {
		defer wg.Done()
		if err := ranks[0].PutSignal(dst, src, sig, 1, backend.Launch{}); err != nil {
			t.Error(err)
		}
		ranks[0].Barrier()
	}()
	wg.Wait()
	// get: rank 1 fetches rank 0's source.
	got, _ := ranks[1].Alloc(1000)
	ranks[0].Alloc(1000)
	if err := ranks[1].Get(got, src, 0, backend.Launch{}); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 1000)
	ranks[1].Read(got, out)
	if !bytes.Equal(out, data) {
		t.Error("get returned other data")
	}
	if err := ranks[0].Put(dst, src, 2, backend.Launch{}); err == nil {
		t.Error("a put to rank 2 of 2 was accepted")
	}
	if _, err := ranks[0].Alloc(1 << 20); err == nil {
		t.Error("an allocation past the heap was accepted")
	}
}

// stopAfter opens a 2-rank heap, lets rank 0 wait with wait while rank 1 never comes,
// sets the stop flag once the wait sleeps between its polls in fn (see waitingIn) and
// returns how long the wait went on after it, and its error.
func stopAfter(t *testing.T, fn string, wait func(b *Backend) error) (time.Duration, error) {
	t.Helper()
	ShmDir = t.TempDir()
	path := HeapPath("stop")
	if err := Create(path, 2, 1<<12); err != nil {
		t.Fatal(err)
	}
	b, err := Open(path, 0, 2, 1<<12)
	if err != nil {
		t.Fatal(err)
	}
	defer stopped.Store(false)
	done := make(chan error, 1)
	go func() { done <- wait(b) }()
	waitingIn(t, fn, done)
	stopped.Store(true)
	t0 := time.Now()
	select {
	case err := <-done:
		took := time.Since(t0)
		b.Close()
		return took, err
	case <-time.After(2 * time.Second):
		// Left mapped: the wait still reads it.
		t.Fatal("the wait went on 2 s after the stop")
	}
	return 0, nil
}

// waitingIn returns once a goroutine's stack shows it asleep in the backoff of the
// backend's method fn (Barrier, WaitSignal): the wait is under way, past its spinning
// and yielding, where a waiting rank spends its time. A stop set before the wait began
// would end it at its first poll and prove nothing. It fails the test when the wait
// returned instead (done), or after 5 s.
func waitingIn(t *testing.T, fn string, done chan error) {
	t.Helper()
	in := "cpu.(*Backend)." + fn + "("
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		all := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(all, "\n\n") {
			if strings.Contains(g, "\ntime.Sleep(") && strings.Contains(g, "cpu.(*backoff).slow(") && strings.Contains(g, in) {
				return
			}
		}
		select {
		case err := <-done:
			t.Fatalf("%s returned before the stop: %v", fn, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine sleeps in the backoff of %s after 5 s; the goroutines:\n%s", fn, all)
		}
	}
}

// SIGTERM (the stop flag) ends a barrier whose peer never arrives, and a signal wait
// whose signal never comes, at once: not after the launcher's grace period.
func TestStopEndsWaits(t *testing.T) {
	took, err := stopAfter(t, "Barrier", func(b *Backend) error { return b.Barrier() })
	if !errors.Is(err, ErrStopped) || took > 100*time.Millisecond {
		t.Errorf("barrier: returned %v after %s; want ErrStopped within 100 ms", err, took)
	}
	took, err = stopAfter(t, "WaitSignal", func(b *Backend) error {
		b.WaitLimit = time.Minute
		sig, _ := b.Alloc(8)
		return b.WaitSignal(sig, 8, 1, backend.Launch{})
	})
	if !errors.Is(err, ErrStopped) || took > 100*time.Millisecond {
		t.Errorf("signal wait: returned %v after %s; want ErrStopped within 100 ms", err, took)
	}
}

// Creating a heap removes the heaps of launchers that died before their ranks mapped
// them (their pid is gone), and keeps those of live launchers, of other pid namespaces,
// and files that are not symmem's own launcher's heaps.
func TestCreateRemovesStaleHeaps(t *testing.T) {
	dir := t.TempDir()
	ShmDir = dir
	// A pid that is not running: a child that has exited and been reaped.
	child := exec.Command("true")
	if err := child.Run(); err != nil {
		t.Skip("cannot start a child process:", err)
	}
	dead := child.Process.Pid
	if running(dead) {
		t.Skipf("pid %d was reused already", dead)
	}
	live := os.Getpid()
	mk := func(name, ns string, age time.Duration) string {
		p := filepath.Join(dir, name)
		hdr := make([]byte, headerSize)
		copy(hdr[offPidNS:], ns)
		if err := os.WriteFile(p, hdr, 0o600); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-age)
		os.Chtimes(p, old, old)
		return p
	}
	self := pidNamespace()
	if self == "" {
		t.Skip("no /proc/self/ns/pid here")
	}
	staleHeap := mk(fmt.Sprintf("symmem-%d-0123456789ab.heap", dead), self, 0)
	liveHeap := mk(fmt.Sprintf("symmem-%d-0123456789ab.heap", live), self, time.Hour)
	otherNS := mk(fmt.Sprintf("symmem-%d-aaaaaaaaaaaa.heap", dead), "pid:[1]", time.Hour)
	oldFormatNew := mk(fmt.Sprintf("symmem-%d-bbbbbbbbbbbb.heap", dead), "", time.Minute)
	oldFormatOld := mk(fmt.Sprintf("symmem-%d-cccccccccccc.heap", dead), "", time.Hour)
	external := mk("symmem-77.heap", self, time.Hour)
	notOurs := mk(fmt.Sprintf("other-%d-0123456789ab.heap", dead), self, time.Hour)

	path := HeapPath(fmt.Sprintf("%d-fedcba987654", live))
	if err := Create(path, 2, 1<<12); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{staleHeap, oldFormatOld} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s (launcher %d gone) was left behind", filepath.Base(p), dead)
		}
	}
	for _, p := range []string{liveHeap, otherNS, oldFormatNew, external, notOurs, path} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(p), err)
		}
	}
	if ns, _ := recordedPidNS(path); ns != self {
		t.Errorf("the new heap records pid namespace %q, want %q", ns, self)
	}
}

// A launcher that was killed and is not yet reaped (a zombie) runs no more: its heap is
// removed. It was kept for as long as the zombie stayed, which under an init that does
// not reap orphans is for good.
func TestCreateRemovesTheHeapOfAZombie(t *testing.T) {
	dir := t.TempDir()
	ShmDir = dir
	self := pidNamespace()
	if self == "" {
		t.Skip("no /proc/self/ns/pid here")
	}
	child := exec.Command("true")
	if err := child.Start(); err != nil {
		t.Skip("cannot start a child process:", err)
	}
	defer child.Wait()
	pid := child.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if strings.Contains(string(stat), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d did not exit: %s", pid, stat)
		}
	}
	stale := filepath.Join(dir, fmt.Sprintf("symmem-%d-0123456789ab.heap", pid))
	hdr := make([]byte, headerSize)
	copy(hdr[offPidNS:], self)
	if err := os.WriteFile(stale, hdr, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Create(HeapPath(fmt.Sprintf("%d-fedcba987654", os.Getpid())), 2, 1<<12); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("the heap of launcher %d, a zombie, was left behind", pid)
	}
}

// The heap of a job that symmem's launcher starts has no name: a launcher killed
// between making it and its ranks mapping it left 201 MB in /dev/shm. Its ranks reach
// it by the descriptor they inherit, and see one file.
func TestUnnamedHeapLeavesNoName(t *testing.T) {
	ShmDir = t.TempDir()
	if d, err := os.MkdirTemp("/dev/shm", "symmemtest-"); err == nil {
		ShmDir = d
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	f, err := CreateUnnamed(2, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if left, _ := os.ReadDir(ShmDir); len(left) != 0 {
		t.Fatalf("%s holds %v: a launcher killed now would leave it", ShmDir, left[0].Name())
	}
	t.Setenv(EnvHeapFD, strconv.Itoa(int(f.Fd())))
	var ranks [2]*Backend
	for i := range ranks {
		if ranks[i], err = Open(HeapFile("any"), i, 2, 1<<16); err != nil {
			t.Fatal(err)
		}
		defer ranks[i].Close()
	}
	buf, _ := ranks[0].Alloc(8)
	ranks[0].Write(buf, []byte("unnamed!"))
	if err := ranks[0].Put(buf, buf, 1, backend.Launch{}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	ranks[1].Read(buf, got)
	if string(got) != "unnamed!" {
		t.Fatalf("rank 1 read %q through its own mapping", got)
	}
}

func TestPrepareCalmsCrowdedRanks(t *testing.T) {
	t.Setenv("GOMAXPROCS", "") // restored after; unset for the test
	os.Unsetenv("GOMAXPROCS")
	ShmDir = t.TempDir()
	if d, err := os.MkdirTemp("/dev/shm", "symmemtest-"); err == nil {
		ShmDir = d
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	prepare := func(nproc int) backend.Prepared {
		t.Helper()
		p, err := Factory{}.Prepare("", nproc, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		p.Cleanup()
		return p
	}
	env := func(nproc int) []string { return prepare(nproc).Env }
	crowded := runtime.NumCPU() + 1
	if got := env(crowded); !slices.Contains(got, "GOMAXPROCS=1") {
		t.Errorf("%d ranks on %d cores: env %v, want GOMAXPROCS=1", crowded, runtime.NumCPU(), got)
	}
	if s := prepare(crowded).TimerSlack; s <= 0 {
		t.Errorf("%d ranks on %d cores: timer slack %v, want one", crowded, runtime.NumCPU(), s)
	}
	if s := prepare(1).TimerSlack; s != 0 {
		t.Errorf("one rank: timer slack %v, want the launcher's (0)", s)
	}
	if got := env(1); slices.ContainsFunc(got, func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") }) {
		t.Errorf("one rank: env %v sets GOMAXPROCS", got)
	}
	t.Setenv("GOMAXPROCS", "3")
	if got := env(crowded); slices.ContainsFunc(got, func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") }) {
		t.Errorf("GOMAXPROCS set by the caller: env %v overrides it", got)
	}
}
