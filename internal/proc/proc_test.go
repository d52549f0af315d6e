package proc

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestReadsThisProcessAndAStoppedChild(t *testing.T) {
	st, ok, _ := Read(os.Getpid())
	if !ok || st.PPid != os.Getppid() || st.Start == "" || st.State == "T" || st.State == "Z" {
		t.Fatalf("Read(self) = %+v, %v", st, ok)
	}
	if args, err := Args(os.Getpid()); err != nil || !slices.Equal(args, os.Args) {
		t.Errorf("Args(self) = %q, %v; want %q", args, err, os.Args)
	}
	t.Setenv("PROC_TEST_MARK", "a b=c")
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Skip("cannot start sleep:", err)
	}
	defer child.Wait()
	defer child.Process.Kill()
	pid := child.Process.Pid
	// Start returns once the exec has begun; the kernel sets the new program's
	// environment a little later (/proc/PID/environ reads empty until then), so the
	// mark is looked for until it comes.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		env, err := Environ(pid)
		if err == nil && env("PROC_TEST_MARK") == "a b=c" {
			break
		}
		if time.Now().After(deadline) {
			mark := ""
			if env != nil {
				mark = env("PROC_TEST_MARK")
			}
			t.Errorf("Environ(child) PROC_TEST_MARK = %q, %v", mark, err)
			break
		}
	}
	if SameProgram(pid) || !SameProgram(os.Getpid()) {
		t.Errorf("SameProgram: sleep %v, self %v; want false, true", SameProgram(pid), SameProgram(os.Getpid()))
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, ok, _ := Read(pid); ok && st.State == "T" && st.PPid == os.Getpid() {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("stopped child: Read = %+v, %v; want state T, parent %d", st, ok, os.Getpid())
		}
	}
	if !slices.Contains(Pids(), pid) {
		t.Errorf("Pids() lacks the child %d", pid)
	}
	child.Process.Kill()
	child.Wait()
	if _, ok, gone := Read(pid); ok || !gone {
		t.Errorf("Read(ended child) = ok %v, gone %v; want false, true", ok, gone)
	}
}
