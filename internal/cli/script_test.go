package cli

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/symmem/symmem/internal/backend/cpu"
	"github.com/symmem/symmem/internal/result"
)

// TestMain lets the test binary act as the symmem command, so that testscript runs the
// real CLI, the real launcher and real worker processes (the launcher re-executes this
// same binary as its workers).
func TestMain(m *testing.M) {
	// Tests that call a command's run function in-process start workers through
	// os.Executable, which is this binary: let it be the worker.
	if len(os.Args) > 1 && os.Args[1] == "__worker" {
		os.Exit(Main(os.Args[1:]))
	}
	testscript.Main(m, map[string]func(){
		"symmem": func() { os.Exit(Main(os.Args[1:])) },
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("..", "..", "testdata", "script"),
		Setup: func(e *testscript.Env) error {
			e.Setenv("SHMDIR", cpu.ShmDir)
			// A free port for tests that play an external launcher's rank 0.
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			e.Setenv("FREEPORT", strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
			return l.Close()
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// noleaks fails if a symmem heap is left in /dev/shm or a worker still runs.
			"noleaks": func(ts *testscript.TestScript, neg bool, args []string) {
				deadline := time.Now().Add(3 * time.Second)
				for {
					left := leftovers()
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
			"sleep": func(ts *testscript.TestScript, neg bool, args []string) {
				d, err := time.ParseDuration(args[0])
				ts.Check(err)
				time.Sleep(d)
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

// leftovers lists symmem heaps in the shm directory and live worker processes of this
// test binary.
func leftovers() []string {
	var left []string
	heaps, _ := filepath.Glob(filepath.Join(cpu.ShmDir, "symmem-*.heap"))
	left = append(left, heaps...)
	self, _ := os.Executable()
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range procs {
		exe, err := os.Readlink(p)
		if err != nil || exe != self {
			continue
		}
		pid := strings.Split(p, "/")[2]
		if pid == strconv.Itoa(os.Getpid()) {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + pid + "/stat")
		if fields := strings.Fields(string(stat)); len(fields) > 2 && fields[2] == "Z" {
			continue
		}
		env, _ := os.ReadFile("/proc/" + pid + "/environ")
		if strings.Contains(string(env), "SYMMEM_WORKER=1") {
			left = append(left, "worker pid "+pid)
		}
	}
	return left
}
