// Package proc reads what Linux's /proc says of a process on this host: its state,
// parent and start time, its environment and command line, and its program. The
// engine uses it to find and end ranks that are stopped, the CPU backend to tell a
// live launcher from a dead one.
package proc

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Stat is what /proc/PID/stat says of a process.
type Stat struct {
	// State is its state letter: R, S, D, T (stopped by a signal: SIGSTOP, Ctrl-Z),
	// t (stopped by a debugger), Z (a zombie: ended, not yet reaped), ...
	State string
	PPid  int
	// Start is its start time in clock ticks since boot: with the pid, it names the
	// process for good (a pid is reused, the pair is not).
	Start string
}

// Read reads process pid's stat; ok is false when it cannot be read. gone says that
// the process does not exist (as opposed to /proc not saying).
func Read(pid int) (st Stat, ok, gone bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, false, errors.Is(err, fs.ErrNotExist)
	}
	// The command name (field 2) is in parentheses and may hold anything; the fields
	// after its last ')' do not hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 20 {
		return Stat{}, false, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return Stat{}, false, false
	}
	return Stat{State: f[0], PPid: ppid, Start: f[19]}, true, false
}

// Environ is the environment process pid started with, as a lookup (readable for this
// user's own processes).
func Environ(pid int) (func(string) string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			vars[k] = v
		}
	}
	return func(k string) string { return vars[k] }, nil
}

// Args is process pid's command line.
func Args(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), nil
}

// SameProgram says whether process pid runs the program this process runs (the same
// file, however it was named).
func SameProgram(pid int) bool {
	other, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return false
	}
	self, err := os.Stat("/proc/self/exe")
	return err == nil && os.SameFile(self, other)
}

// Pids lists the processes of this host (of this pid namespace).
func Pids() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
