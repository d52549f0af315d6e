package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem"

	"github.com/symmem/symmem/internal/check"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/reference"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/topo/topotest"
)

// h200x2 is a machine of two H200s on NVLink that passes every check.
func h200x2() check.Machine {
	m := scenarios()["h200x8-nvlink"]
	m.OpenDriver = func() (check.Driver, error) { return fakeDriver{version: 13000, devs: h200s(2, 90)}, nil }
	m.NVML = topotest.H200s(2, true)
	return m
}

// measured is a key sweep on two H200s named gpu whose rows are the shipped figures
// times scale (a row's by name in by, where given): a bandwidth scale times, a time
// divided by it.
func measured(t *testing.T, gpu string, scale float64, by map[string]float64) *result.Result {
	t.Helper()
	tbl, err := reference.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	res := &result.Result{Header: result.Header{Backend: "nvshmem", NProc: 2, Link: "NV18", GPUs: []string{gpu + " (GPU-0)", gpu + " (GPU-1)"}}, OK: true}
	for _, f := range tbl.Machines[0].Figures {
		r := result.Row{Op: f.Op, Impl: f.Impl, Size: f.Size, Src: f.Src, Dst: f.Dst, Ranks: f.Ranks, DType: f.DType, Checked: true}
		s := scale
		if v, ok := by[reference.RowName(r)]; ok {
			s = v
		}
		switch f.Metric {
		case "gbps":
			r.GBps = f.Value * s
		case "busbw":
			r.BusGBps = f.Value * s
		case "time_us":
			r.MedUS = f.Value / s
		}
		res.Rows = append(res.Rows, r)
	}
	return res
}

func fakeSweep(out check.Sweep, err error, called *int) func(context.Context, int, string, []symmem.Backend) (check.Sweep, error) {
	return func(context.Context, int, string, []symmem.Backend) (check.Sweep, error) {
		*called++
		return out, err
	}
}

// check-nvshmem --perf on machines and sweeps played by fakes: the exit status, what
// the report says, and (for a node below its figures) the whole report, as people and
// scripts read it.
func TestCheckPerf(t *testing.T) {
	defer func() { machine, sweep = check.Real, runSweep }()
	for _, tc := range []struct {
		name    string
		machine check.Machine
		out     check.Sweep
		err     error
		code    int
		runs    int // sweeps started
		want    []string
		golden  string
	}{
		{"healthy", h200x2(), check.Sweep{Ranks: 2, Res: measured(t, "NVIDIA H200", 0.97, nil), Wall: 9 * time.Second}, nil, exitcode.OK, 1,
			[]string{"perf key sweep ok every row within 15% of the figures of NVIDIA H200 x2 NV18", "GPU backend: ready"}, ""},
		{"below", h200x2(), check.Sweep{Ranks: 2, Res: measured(t, "NVIDIA H200", 1, map[string]float64{
			"put triton 256M 0->1": 0.52, "put triton 16M 0->1": 0.55, "latency triton 8B 0->1": 0.6}), Wall: 9 * time.Second}, nil, exitcode.Regression, 1,
			[]string{"3 of 5 rows", "put triton 256M 0->1 at 52% of its figure", "a link down", "another job on the GPU"}, "perf-below"},
		{"unknown GPU", h200x2(), check.Sweep{Ranks: 2, Res: measured(t, "NVIDIA B200", 1.9, nil)}, nil, exitcode.OK, 1,
			[]string{"no reference for NVIDIA B200 x2 NV18: symmem has figures for NVIDIA H200 x2 NV18, NVIDIA H200 x4 NV18 only",
				"no reference, measured only"}, ""},
		{"one rank", scenarios()["one-gpu"], check.Sweep{Ranks: 1}, nil, exitcode.OK, 1,
			[]string{"skipped: one rank has no link to measure, and there is no reference for NVIDIA H200 x1"}, ""},
		{"no GPU", scenarios()["no-driver"], check.Sweep{}, nil, exitcode.NoGPUBackend, 0,
			[]string{"cannot measure: the GPU backend cannot run here (the failures above), so nothing was measured"}, ""},
		{"sweep fails", h200x2(), check.Sweep{Ranks: 2, Stderr: "[1] rank 1: nvshmem init failed"}, errors.New("rank 1 exited with status 1"), exitcode.NoGPUBackend, 1,
			[]string{"rank 1: nvshmem init failed", "rank 1 exited with status 1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.machine
			machine = func() check.Machine { return m }
			for _, asJSON := range []bool{false, true} {
				runs := 0
				sweep = fakeSweep(tc.out, tc.err, &runs)
				nproc := 2
				if tc.out.Ranks == 1 {
					nproc = 1
				}
				var out bytes.Buffer
				err := runCheck(context.Background(), &CheckOptions{JSON: asJSON, Perf: true, Tolerance: "15%", NProc: nproc}, IO{Out: &out, Err: &out, Backends: binaryBackends})
				if got := symmem.ExitCode(err); err != nil && got != tc.code || err == nil && tc.code != exitcode.OK {
					t.Errorf("json %v: exit %d (%v), want %d", asJSON, got, err, tc.code)
				}
				if runs != tc.runs {
					t.Errorf("json %v: %d sweeps, want %d", asJSON, runs, tc.runs)
				}
				if !asJSON {
					flat := strings.Join(strings.Fields(out.String()), " ") // unwrapped
					for _, w := range tc.want {
						if !strings.Contains(flat, w) {
							t.Errorf("the report does not say %q:\n%s", w, out.String())
						}
					}
				}
				if tc.golden != "" {
					ext := map[bool]string{false: ".txt", true: ".json"}[asJSON]
					golden(t, filepath.Join("testdata", "check", tc.golden+ext), out.Bytes())
				}
			}
		})
	}
}

func TestCheckToleranceRefused(t *testing.T) {
	for _, tc := range []struct {
		opts CheckOptions
		want string
	}{
		{CheckOptions{Tolerance: "10%", toleranceSet: true}, "--tolerance is for --perf's rows"},
		{CheckOptions{Perf: true, Tolerance: "10"}, "give a percentage with its unit"},
		{CheckOptions{Perf: true, Tolerance: "100%"}, "at most 100% below"},
		{CheckOptions{Perf: true, Tolerance: "-1%"}, "from 0% to 1000%"},
	} {
		tc.opts.NProc = 2
		err := runCheck(context.Background(), &tc.opts, IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
		if symmem.ExitCode(err) != exitcode.Usage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error saying %q", tc.opts, err, tc.want)
		}
	}
}

// The key sweep plans on the GPU backend for the rank counts the figures are for (a
// dry run: planned against the GPU backend's implementations, nothing started), and
// every figure is among the rows it plans.
func TestKeySweepPlansOnTheGPUBackend(t *testing.T) {
	tbl, err := reference.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range tbl.Machines {
		o := symmem.DefaultJobOptions()
		o.NProc, o.Backend, o.DryRun, o.Backends = m.NProc, symmem.NVSHMEM, true, binaryBackends
		job, err := symmem.NewJob(o)
		if err != nil {
			t.Fatal(err)
		}
		p, err := job.PlanBench(symmem.ReferenceSweep())
		if err != nil {
			t.Fatalf("%s: %v", m.Name(), err)
		}
		if s := p.Sweep(); !slices.Equal(s.Spec.Impls, []string{"triton"}) || s.Spec.DType != "bf16" || !slices.Equal(s.Sizes, []symmem.Size{16 << 20, 256 << 20}) {
			t.Errorf("%s: the sweep planned %+v", m.Name(), *s)
		}
	}
}

// --smoke and --perf are refused together before anything runs, under an external
// launcher (a rank starts NVSHMEM once) and on a machine of its own alike (once it
// ran both there and exited 7).
func TestCheckSmokeAndPerfRefused(t *testing.T) {
	for _, torchrun := range []bool{false, true} {
		t.Run(fmt.Sprint("torchrun ", torchrun), func(t *testing.T) {
			if torchrun {
				for k, v := range map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
					"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "t"} {
					t.Setenv(k, v)
				}
			}
			defer func() { sweep = runSweep }()
			runs := 0
			sweep = fakeSweep(check.Sweep{}, nil, &runs)
			err := runCheck(context.Background(), &CheckOptions{Smoke: true, Perf: true, Tolerance: "15%", NProc: 2}, IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
			if symmem.ExitCode(err) != exitcode.Usage || !strings.HasPrefix(err.Error(), "--smoke and --perf: give one of them") || runs != 0 {
				t.Errorf("%v (%d sweeps), want a usage error before any sweep", err, runs)
			}
		})
	}
}
