package engine

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// EnvFault is a test-only switch that makes one rank fail on purpose:
// "RANK:MODE[:PHASE]" with MODE exit (status 9), crash (a panic), kill (SIGKILL),
// hang, stop (SIGSTOP: the process freezes), or corrupt (the rank sees one wrong byte in what it reads back: tests the
// comparison) and PHASE start (before the rank does anything of its job: it has not
// dialled the store, nor rank 0 listened), init, join (an external job's rank that is not rank 0: after
// its greeting and first heartbeat, before it joins rank 0's store), op (default op)
// or, in a sweep, a number N: before the rank's N-th checked window (counting from 0;
// each repetition is one; a hang's heartbeats go on, so only --timeout ends the job);
// or "RANK:drop[:N]": the rank's backend
// skips its transfers and signals from its N-th measurement on (counting from 0; 0 when
// N is left out), at the point of delivery: tests that every check notices; or
// "RANK:redop:OP": the rank's backend combines its reductions with OP (an operator,
// or first: keep the first rank's value) instead of the one asked, where it reduces:
// tests that every operator's check notices; or
// "RANK:unordered[:N]": the rank's backend drops the orderings operations promise from
// its N-th measurement on (put-flag's flag lands before its data; a barrier round
// returns before the rank's own stamp lands, which its peers' checks see, and nobody
// waits): tests that the checks of an ordering notice; or
// "RANK:absent[:N]": the rank stays away from collectives altogether from its N-th
// measurement on (GPUs), so its peers' kernels wait at barriers it never comes to:
// tests that the triton kernels' waits end by themselves (NCCL's and NVSHMEM's stream
// barriers, under --impl nccl and copy-engine, are not bounded on the GPU: the job's
// --timeout ends those); or "RANK:slow:PCT": every operation of the rank (put, get,
// put-signal, a signal wait, a collective) is delayed by PCT percent of its own time
// where it runs (the CPU backend), so that a bench under it really measures a
// slowdown: tests that compare calls it.
const EnvFault = "SYMMEM_TEST_FAULT"

// EnvGrace is a test-only switch: the launcher's grace period between its SIGTERM and
// its SIGKILL (a duration; launch.Config's 1 s when unset). Tests that prove a stop is
// prompt set it far above what they assert, so a slow machine cannot pass them by way of
// the SIGKILL, nor fail them by being slow.
const EnvGrace = "SYMMEM_TEST_GRACE"

// testGrace reads EnvGrace; 0 leaves the launcher's default.
func testGrace() (time.Duration, error) {
	s := os.Getenv(EnvGrace)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, badInput("%s=%q: want a positive duration such as 10s", EnvGrace, s)
	}
	return d, nil
}

// FaultExitStatus is the status the exit fault ends a rank with: one no real failure
// uses, so tests can tell it apart.
const FaultExitStatus = 9

// Fault is the parsed test-only fault switch.
type Fault struct {
	Rank  int
	Mode  string
	Phase string
	From  int     // drop, absent: the first measurement the fault holds for
	Pct   float64 // slow: by how much, in percent of each operation's time
}

// ParseFault reads EnvFault's value; "" is no fault.
func ParseFault(s string) (*Fault, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("%s=%q: want RANK:MODE[:PHASE]", EnvFault, s)
	}
	r, err := strconv.Atoi(parts[0])
	if err != nil {
		return nil, fmt.Errorf("%s=%q: bad rank", EnvFault, s)
	}
	f := &Fault{Rank: r, Mode: parts[1], Phase: "op"}
	if f.Mode == "redop" {
		if len(parts) != 3 {
			return nil, fmt.Errorf("%s=%q: want RANK:redop:OP (%s or first)", EnvFault, s, ops.RedOpNames())
		}
		if _, err := faultRedOp(parts[2]); err != nil {
			return nil, fmt.Errorf("%s=%q: %v", EnvFault, s, err)
		}
		f.Phase = parts[2]
		return f, nil
	}
	if f.Mode == "slow" {
		if len(parts) == 3 {
			f.Pct, err = strconv.ParseFloat(parts[2], 64)
		}
		if len(parts) != 3 || err != nil || !(f.Pct > 0 && f.Pct <= 10000) {
			return nil, fmt.Errorf("%s=%q: want RANK:slow:PCT, PCT the percent of its own time each operation is delayed by (above 0, up to 10000), such as 0:slow:30", EnvFault, s)
		}
		return f, nil
	}
	if f.Mode == "drop" || f.Mode == "absent" || f.Mode == "unordered" || f.Mode == string(backend.FaultSkipTile) || f.Mode == string(backend.FaultEarly) {
		if len(parts) == 3 {
			if f.From, err = strconv.Atoi(parts[2]); err != nil || f.From < 0 {
				return nil, fmt.Errorf("%s=%q: %s's N is the first measurement it holds for, counting from 0", EnvFault, s, f.Mode)
			}
		}
		return f, nil
	}
	if len(parts) == 3 {
		f.Phase = parts[2]
	}
	switch f.Mode {
	case "exit", "crash", "kill", "hang", "stop", "corrupt":
	default:
		return nil, fmt.Errorf("%s=%q: mode must be exit, crash, kill, hang, stop, corrupt, drop, unordered, redop, absent, slow, skip-tile or early", EnvFault, s)
	}
	return f, nil
}

// DropHook returns what to call before measurement seq on rank (see bench.Runner's
// BeforeMeasure): it switches b's delivery (drop), its orderings (unordered) or its
// part in collectives (absent) off from the fault's measurement on. Nil when neither fault is meant for this rank.
func (f *Fault) DropHook(rank int, b backend.Backend) (func(seq int), error) {
	if f == nil || f.Rank != rank {
		return nil, nil
	}
	var set func(bool)
	what := "drops its transfers"
	switch f.Mode {
	case "drop":
		d, ok := b.(backend.Dropper)
		if !ok {
			return nil, fmt.Errorf("%s: the %s backend cannot drop transfers", EnvFault, b.Name())
		}
		set = d.SetDrop
	case "unordered":
		u, ok := b.(backend.Unorderer)
		if !ok {
			return nil, fmt.Errorf("%s: the %s backend cannot drop its orderings", EnvFault, b.Name())
		}
		set, what = u.SetUnordered, "drops its orderings"
	case "absent":
		a, ok := b.(backend.Absenter)
		if !ok {
			return nil, fmt.Errorf("%s: the %s backend cannot stay away from collectives (absent is for GPUs)", EnvFault, b.Name())
		}
		set, what = a.SetAbsent, "stays away from collectives"
	case string(backend.FaultSkipTile), string(backend.FaultEarly):
		ff, ok := b.(backend.FusedFaulter)
		if !ok {
			return nil, fmt.Errorf("%s: the %s backend cannot deliver a fused operation's tile wrongly", EnvFault, b.Name())
		}
		set = func(on bool) {
			var mode backend.FusedFault
			if on {
				mode = backend.FusedFault(f.Mode)
			}
			ff.SetFusedFault(mode)
		}
		what = "delivers its first tile of C wrongly (" + f.Mode + ")"
	case "redop":
		w, ok := b.(backend.RedOpFaulter)
		if !ok {
			return nil, fmt.Errorf("%s: the %s backend cannot reduce with a wrong operator", EnvFault, b.Name())
		}
		op, _ := faultRedOp(f.Phase) // ParseFault checked it
		set, what = func(on bool) {
			if on {
				w.SetRedOpFault(op)
			}
		}, "reduces with "+op.Name
	default:
		return nil, nil
	}
	return func(seq int) {
		if seq == f.From {
			fmt.Fprintf(os.Stderr, "injected fault: rank %d %s from measurement %d on\n", rank, what, seq)
		}
		set(seq >= f.From)
	}, nil
}

// faultRedOp is the operator the redop fault reduces with: one of ops.RedOps, or first.
func faultRedOp(name string) (ops.RedOp, error) {
	if name == ops.First.Name {
		return ops.First, nil
	}
	return ops.LookupRedOp(name)
}

// Slow makes rank's backend b slow (the slow fault), if the fault is that and meant
// for this rank.
func (f *Fault) Slow(rank int, b backend.Backend) error {
	if f == nil || f.Rank != rank || f.Mode != "slow" {
		return nil
	}
	s, ok := b.(backend.Slower)
	if !ok {
		return fmt.Errorf("%s: the %s backend cannot slow its operations (slow is for the cpu backend)", EnvFault, b.Name())
	}
	fmt.Fprintf(os.Stderr, "injected fault: rank %d's operations %g%% slower\n", rank, f.Pct)
	s.SetSlow(f.Pct)
	return nil
}

// AtMeasure returns what to call before measurement seq on rank (bench.Runner's
// BeforeMeasure) for a fault at a measurement ("RANK:MODE:N"), or nil.
func (f *Fault) AtMeasure(rank int) func(seq int) {
	if f == nil || f.Rank != rank {
		return nil
	}
	n, err := strconv.Atoi(f.Phase)
	if err != nil || n < 0 {
		return nil
	}
	return func(seq int) {
		if seq == n {
			f.Trigger(rank, f.Phase)
		}
	}
}

// Tamper returns how rank must spoil what it reads back (the corrupt mode: the first
// byte flipped), or nil.
func (f *Fault) Tamper(rank int) func(out []byte) {
	if f == nil || f.Mode != "corrupt" || f.Rank != rank {
		return nil
	}
	return func(out []byte) {
		if len(out) > 0 {
			out[0] ^= 0xff
		}
	}
}

// Trigger makes the fault happen if it is for this rank and phase.
func (f *Fault) Trigger(rank int, phase string) {
	if f == nil || f.Rank != rank || f.Phase != phase || f.Mode == "drop" || f.Mode == "absent" || f.Mode == "unordered" || f.Mode == "corrupt" || f.Mode == "redop" || f.Mode == "slow" ||
		f.Mode == string(backend.FaultSkipTile) || f.Mode == string(backend.FaultEarly) {
		return
	}
	fmt.Fprintf(os.Stderr, "injected fault: rank %d %s at %s\n", rank, f.Mode, phase)
	switch f.Mode {
	case "exit":
		end(FaultExitStatus)
	case "crash":
		panic("injected crash") // dies like any crashed Go program: exit status 2, a stack trace
	case "kill":
		signalSelf(syscall.SIGKILL)
	case "hang":
		select {}
	case "stop":
		signalSelf(syscall.SIGSTOP)
	}
}

// signalSelf sends sig to the calling thread, so that it takes effect before Trigger
// returns. kill(getpid()) hands a stop signal to the thread group's leader, often
// another thread asleep in the Go runtime: until it woke and stopped the group, this
// one ran on, and a rank meant to stop at "op" sometimes finished its whole test
// first (external.txtar tr12, about one run in 50 on a busy machine).
func signalSelf(sig syscall.Signal) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	syscall.Tgkill(os.Getpid(), syscall.Gettid(), sig)
}

// corrupting spoils everything the rank reads back (the corrupt fault, for run).
type corrupting struct {
	backend.Backend
	tamper func([]byte)
}

func (c corrupting) Read(b backend.Buffer, out []byte) error {
	err := c.Backend.Read(b, out)
	c.tamper(out)
	return err
}

// Unwrap is the backend under the fault: what reads a guard, not data (ops.checkGuard),
// reads it there, so that the fault is blamed on the data it stands for.
func (c corrupting) Unwrap() backend.Backend { return c.Backend }

// Collective passes collectives through to the wrapped backend: the corrupt fault
// changes only what Read returns.
func (c corrupting) Collective(x backend.Collective, l backend.Launch) error {
	if cl, ok := c.Backend.(backend.Collectiver); ok {
		return cl.Collective(x, l)
	}
	return fmt.Errorf("the %s backend runs no collectives", c.Backend.Name())
}

// The one-to-all put, signals, flags and barrier rounds pass through to the wrapped
// backend too.

func (c corrupting) PutAll(dst, src backend.Buffer, l backend.Launch) error {
	return backend.PutAll(c.Backend, dst, src, l)
}

func (c corrupting) signaler() (backend.Signaler, error) {
	if s, ok := c.Backend.(backend.Signaler); ok {
		return s, nil
	}
	return nil, fmt.Errorf("the %s backend has no signal ops", c.Backend.Name())
}

func (c corrupting) SignalOp(sig backend.Buffer, op, value uint64, peer int, l backend.Launch) error {
	s, err := c.signaler()
	if err != nil {
		return err
	}
	return s.SignalOp(sig, op, value, peer, l)
}

func (c corrupting) PutFlag(dst, src, flag backend.Buffer, value uint64, order string, peer int, l backend.Launch) error {
	s, err := c.signaler()
	if err != nil {
		return err
	}
	return s.PutFlag(dst, src, flag, value, order, peer, l)
}

func (c corrupting) WaitWord(word backend.Buffer, value uint64, op ops.Op, l backend.Launch) error {
	s, err := c.signaler()
	if err != nil {
		return err
	}
	return s.WaitWord(word, value, op, l)
}

func (c corrupting) Meet(m backend.Meeting, l backend.Launch) error {
	if mt, ok := c.Backend.(backend.Meeter); ok {
		return mt.Meet(m, l)
	}
	return fmt.Errorf("the %s backend has no barrier rounds", c.Backend.Name())
}
