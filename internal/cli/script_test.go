package cli

import (
	"encoding/json"
	"flag"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/backend/cpu"
	"github.com/symmem/symmem/internal/result"
)

// TestMain lets the test binary act as the symmem command, so that testscript runs the
// real CLI, the real launcher and real worker processes (the launcher re-executes this
// same binary as its workers).
func TestMain(m *testing.M) {
	// Tests that call a command's run function in-process start workers through
	// os.Executable, which is this binary: let it be the worker.
	if len(os.Args) > 1 && os.Args[1] == symmem.WorkerArg {
		os.Exit(Main(os.Args[1:], symmem.Backends()...))
	}
	if filepath.Base(os.Args[0]) != "symmem" {
		runMoreAtOnce()
		os.Setenv("GORACE", quickRaceExit(os.Getenv("GORACE")))
	}
	testscript.Main(m, map[string]func(){
		"symmem": func() { os.Exit(Main(os.Args[1:], symmem.Backends()...)) },
	})
}

// scriptsAtOnce is how many scripts run at once unless -test.parallel says. They spend
// most of their time waiting (for the ranks they start, and for the timeouts and stall
// limits they test), so the default of one per core (2 on the CI machine) left the
// cores idle for most of the package's time.
const scriptsAtOnce = 8

// runMoreAtOnce raises -test.parallel to scriptsAtOnce where it was not given. Only the
// scripts (and tests that call t.Parallel) are affected.
func runMoreAtOnce() {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && runtime.GOMAXPROCS(0) < scriptsAtOnce {
		flag.Set("test.parallel", strconv.Itoa(scriptsAtOnce))
	}
}

// quickRaceExit adds atexit_sleep_ms=0 to the race detector's options unless they set
// it: a binary built with -race sleeps a second before it exits (so that other threads
// can still report), and every symmem job of the scripts is a launcher and its workers,
// each such a binary: two seconds of a job that runs in 50 ms. A race is still reported
// where it happens.
func quickRaceExit(opts string) string {
	if strings.Contains(opts, "atexit_sleep_ms") {
		return opts
	}
	return strings.TrimSpace(opts + " atexit_sleep_ms=0")
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("..", "..", "testdata", "script"),
		Setup: func(e *testscript.Env) error {
			dir, err := os.MkdirTemp(cpu.ShmDir, "symmemtest-")
			if err != nil {
				return err
			}
			e.Defer(func() { os.RemoveAll(dir) })
			e.Setenv("SHMDIR", dir)
			// scripts/test.sh gives the scripts a plain build of symmem (in
			// envScriptBin): a -race one costs three times the CPU to start, and the
			// scripts start hundreds. Without it they run this binary.
			if bin := os.Getenv(envScriptBin); bin != "" {
				e.Setenv("PATH", bin+string(os.PathListSeparator)+e.Getenv("PATH"))
			}
			// The scripts read boxed tables; without a terminal they would be plain.
			e.Setenv("SYMMEM_FORMAT", "box")
			e.Setenv("GORACE", os.Getenv("GORACE"))
			e.Setenv(envScriptShm, dir)
			// Every process the script starts inherits the mark; noleaks looks for live
			// processes that carry it.
			e.Setenv(envScriptMark, filepath.Base(dir))
			// A free port for tests that play an external launcher's rank 0; the one
			// after it must be free too (torchrun's store is on MASTER_PORT+1). It is
			// below Linux's ephemeral range (32768 up): one the kernel handed out (":0")
			// is free when taken, but the ranks' own connections draw their local
			// ports from that range, and one that drew it kept a later section's rank
			// 0 from listening there (seen once in about a dozen runs of external.txtar).
			for try := 0; ; try++ {
				port := 20000 + rand.IntN(12000)
				l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
				if err != nil {
					if try == 50 {
						return err
					}
					continue
				}
				next, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+1))
				l.Close()
				if err == nil {
					next.Close()
					e.Setenv("FREEPORT", strconv.Itoa(port))
					return nil
				}
				if try == 50 {
					return err
				}
			}
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// noleaks fails if this script left a symmem heap in its heap directory, or
			// a process it started (a launcher, a worker, an external rank) still runs.
			"noleaks": func(ts *testscript.TestScript, neg bool, args []string) {
				deadline := time.Now().Add(3 * time.Second)
				for {
					left := leftovers(ts.Getenv("SHMDIR"), envScriptMark+"="+ts.Getenv(envScriptMark))
					if len(left) == 0 || time.Now().After(deadline) {
						if len(left) > 0 {
							ts.Fatalf("left behind: %s", strings.Join(left, ", "))
						}
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			},
			// slowdown IN OUT FACTOR writes IN's bench result with every time multiplied
			// by FACTOR (bandwidth divided), as a slower build would measure it.
			"slowdown": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 3 {
					ts.Fatalf("usage: slowdown IN OUT FACTOR")
				}
				res, err := result.Load(ts.MkAbs(args[0]))
				ts.Check(err)
				f, err := strconv.ParseFloat(args[2], 64)
				ts.Check(err)
				for i := range res.Rows {
					r := &res.Rows[i]
					for j := range r.TimesUS {
						r.TimesUS[j] *= f
					}
					r.Finish()
				}
				out, err := json.Marshal(res)
				ts.Check(err)
				ts.Check(os.WriteFile(ts.MkAbs(args[1]), out, 0o644))
			},
			// stranger ADDR: what a process that is not part of a job may try against its
			// store: a wrong token, garbage, an unterminated line, and a connection that
			// sends nothing (left open until the script ends).
			"stranger": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 {
					ts.Fatalf("usage: stranger ADDR")
				}
				var err error
				for i := 0; i < 100; i++ { // until rank 0 hosts the store
					var c net.Conn
					if c, err = net.Dial("tcp", args[0]); err == nil {
						c.Close()
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				ts.Check(err)
				for _, msg := range []string{`{"op":"hello","token":"wrong"}` + "\n", "\x00\xff garbage\n\n{", strings.Repeat("A", 1<<20)} {
					c, err := net.Dial("tcp", args[0])
					ts.Check(err)
					c.Write([]byte(msg))
					c.Close()
				}
				silent, err := net.Dial("tcp", args[0])
				ts.Check(err)
				ts.Defer(func() { silent.Close() })
			},
			// holdport ADDR: another program holds ADDR (until the script ends).
			"holdport": func(ts *testscript.TestScript, neg bool, args []string) {
				l, err := net.Listen("tcp", args[0])
				ts.Check(err)
				ts.Defer(func() { l.Close() })
			},
			// waitfor FILE REGEXP: waits until FILE (a background job's stderr, say)
			// holds a line that matches REGEXP, the job saying it got that far; it
			// fails after 30 s, quoting FILE. A script waits on a state, never a sleep.
			"waitfor": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 2 {
					ts.Fatalf("usage: waitfor FILE REGEXP")
				}
				re, err := regexp.Compile("(?m)" + args[1])
				ts.Check(err)
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					b, _ := os.ReadFile(ts.MkAbs(args[0]))
					if re.Match(b) {
						return
					}
					if time.Now().After(deadline) {
						ts.Fatalf("%s has no line matching %q after 30s; it holds:\n%s", args[0], args[1], b)
					}
				}
			},
			// within N: the previous command took at most N seconds (from the script's
			// own clock, set by "mark").
			"mark": func(ts *testscript.TestScript, neg bool, args []string) {
				ts.Setenv("MARK", strconv.FormatInt(time.Now().UnixNano(), 10))
			},
			"within": func(ts *testscript.TestScript, neg bool, args []string) {
				start, _ := strconv.ParseInt(ts.Getenv("MARK"), 10, 64)
				limit, err := time.ParseDuration(args[0])
				ts.Check(err)
				if took := time.Since(time.Unix(0, start)); took > limit {
					ts.Fatalf("took %s, more than %s", took, limit)
				}
			},
		},
	})
}

// The test scripts' own environment: their heap directory (the CPU backend's test
// setting), the mark their processes carry and where a plain build of symmem is. The
// last two do not start with SYMMEM_, so the CLI does not take them for misspelt
// settings.
const (
	// Each script keeps its heaps in a directory of its own, so that noleaks sees its
	// own leftovers and not those of tests running beside it.
	envScriptShm  = cpu.EnvTestShmDir
	envScriptMark = "SYMMEMTEST_SCRIPT"
	envScriptBin  = "SYMMEMTEST_BIN"
)

// leftovers lists symmem heaps in dir and live processes whose environment holds mark.
func leftovers(dir, mark string) []string {
	heaps, _ := filepath.Glob(filepath.Join(dir, "symmem-*.heap"))
	left := heaps
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		pid := strings.Split(p, "/")[2]
		if pid == strconv.Itoa(os.Getpid()) {
			continue
		}
		env, err := os.ReadFile(p)
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), mark) {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + pid + "/stat")
		if fields := strings.Fields(string(stat)); len(fields) > 2 && fields[2] == "Z" {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		left = append(left, "pid "+pid+" ("+strings.Join(strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00"), " ")+")")
	}
	return left
}
