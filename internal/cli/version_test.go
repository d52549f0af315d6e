package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/buildinfo"
	"github.com/symmem/symmem/internal/result"
)

// --version and version print one text: version, commit and build date, and the
// kernels'.
func TestVersionSaysCommitAndDate(t *testing.T) {
	defer func(c, d string) { buildinfo.Commit, buildinfo.Date = c, d }(buildinfo.Commit, buildinfo.Date)
	buildinfo.Commit, buildinfo.Date = "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z"
	var outs []string
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var out bytes.Buffer
		root := NewCmdRoot(IO{Out: &out, Err: &out})
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		outs = append(outs, out.String())
	}
	if outs[0] != outs[1] {
		t.Errorf("--version printed\n%s\nversion printed\n%s", outs[0], outs[1])
	}
	if want := `^symmem \S+ \(commit 0123456789ab, built 2026-01-02T03:04:05Z\) go1\.\S+ \S+/\S+\nkernels: .*\(sha256 [0-9a-f]{12}\)\n$`; !regexp.MustCompile(want).MatchString(outs[0]) {
		t.Errorf("version printed %q, want it to match %s", outs[0], want)
	}
}

// Every result says what made it, and run names the launcher that started it.
func TestResultsCarryProvenance(t *testing.T) {
	var out, errb bytes.Buffer
	opts := &BenchOptions{JobOptions: cpuJob(), Ops: []string{"put"}, MinSize: 1024, MaxSize: 1024, Factor: 2, Iters: 2, Warmup: 1, Reps: 1, Overlap: 1, JSON: true, maxSizeChanged: true}
	if err := runBench(t.Context(), opts, IO{Out: &out, Err: &errb, Args: []string{"bench", "--json"}}); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var res result.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	p := res.Header.Provenance
	if p == nil || p.Symmem.Version == "" || p.Symmem.Go == "" || len(p.Kernels) != 64 || p.Host == "" || !strings.HasPrefix(p.Started, "20") || res.Header.Command != "symmem bench --json" {
		t.Errorf("header %+v, provenance %+v", res.Header, p)
	}
	var b bytes.Buffer
	result.PrintRun(&b, result.RunReport{Op: "put", NProc: 2, Pattern: "pair", Backend: "cpu", Launcher: "openmpi", OK: true})
	if !strings.Contains(b.String(), "backend cpu, started by openmpi\n") {
		t.Errorf("run's table does not name its launcher:\n%s", b.String())
	}
}
