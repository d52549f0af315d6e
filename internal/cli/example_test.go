package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/exitcode"
)

// kernels example lists every example file the binary carries with the ops it serves,
// prints one byte for byte (what examples/ holds), and refuses a name it does not
// carry, naming those it does. A printed example passes kernels build --check.
func TestKernelsExample(t *testing.T) {
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := NewCmdKernelsExample(IO{Out: &out, Err: io.Discard})
		cmd.SetArgs(append([]string{}, args...)) // never nil: cobra would read os.Args
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		return out.String(), err
	}
	list, err := run()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../examples/*.py")
	if len(files) < 6 {
		t.Fatalf("examples: %v", files)
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".py"); !strings.Contains(list, name+" ") {
			t.Errorf("the list lacks %s:\n%s", name, list)
		}
	}
	for _, want := range []string{"push_collectives     all-gather, all-to-all, broadcast, reduce-scatter, reduce-scatter:float32", "moe_all_to_all       dispatch, combine, combine:float32"} {
		if !strings.Contains(list, want) {
			t.Errorf("the list lacks %q:\n%s", want, list)
		}
	}
	got, err := run("one_shot_all_reduce")
	want, _ := os.ReadFile("../../examples/one_shot_all_reduce.py")
	if err != nil || got != string(want) {
		t.Errorf("kernels example one_shot_all_reduce: %v, %d bytes where examples/ has %d", err, len(got), len(want))
	}
	if _, err := run("nope"); symmem.ExitCode(err) != exitcode.Usage || !strings.Contains(err.Error(), "no such example; symmem carries moe_all_to_all, one_shot_all_reduce") {
		t.Errorf("kernels example nope: %v (exit %d)", err, symmem.ExitCode(err))
	}
	needPython(t)
	mine := filepath.Join(t.TempDir(), "mine.py")
	if err := os.WriteFile(mine, []byte(got), 0o644); err != nil {
		t.Fatal(err)
	}
	o := &KernelsBuildOptions{File: mine, Arch: []int{90}, Warps: DefaultBuildWarps, Out: filepath.Join(t.TempDir(), "out"), Check: true}
	var stdout bytes.Buffer
	if err := runKernelsBuild(context.Background(), o, IO{Out: &stdout, Err: io.Discard}); err != nil || !strings.Contains(stdout.String(), "serves all-reduce as mine.all_reduce_bf16") {
		t.Errorf("kernels build --check of the printed example: %v, %q", err, stdout.String())
	}
}
