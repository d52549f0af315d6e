package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/check"
	"github.com/symmem/symmem/internal/config"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/setting"
)

// CheckOptions are `symmem check-nvshmem`'s settings.
type CheckOptions struct {
	JSON       bool
	Smoke      bool
	Perf       bool
	Tolerance  string // --perf's, with its unit: 15%
	Verbose    bool
	NVSHMEMLib string
	NCCLLib    string
	NProc      int
	// nprocSet: --nproc was given; without it, a rank of an external launcher's job
	// checks for the ranks the launcher put on its host.
	nprocSet bool
	// toleranceSet: --tolerance was typed on the command line (it needs --perf).
	toleranceSet bool
}

// machine is replaced in tests.
var machine = check.Real

// NewCmdCheck builds `symmem check-nvshmem`.
func NewCmdCheck(streams IO) *cobra.Command {
	opts := &CheckOptions{}
	cmd := &cobra.Command{
		Use:   "check-nvshmem",
		Short: "Check whether this machine can run the GPU backend, and say how to fix what cannot",
		Long: `check-nvshmem looks at everything the NVSHMEM backend needs, before a run fails on it:
the NVIDIA driver and its CUDA version; every GPU; the links between GPUs (NVLink count
and rate or PCIe path, from NVML) and peer access; the NVSHMEM host library (every place
searched, the one chosen, its version, the bootstrap plugin and device bitcode); whether
the embedded kernels have code for each GPU and can be served by that library; NCCL,
which the nccl implementation needs (where it was found and how, its version); whether
symmem kernels build can build your own kernels here (Python, Triton, the NVSHMEM
wheel); the environment variables that change NVSHMEM's behaviour; and the memory a
default run needs.

--perf then asks whether the node is healthy: it runs a short key sweep on --nproc
ranks (triton put at 16M and 256M, the 8-byte latency, bf16 all-reduce at 16M and 256M;
every byte checked; some seconds) and sets each row beside the figures symmem ships
for that GPU, rank count and link (from docs/results: NVIDIA H200 x2 and x4 on NV18).
A row more than --tolerance below its figure is named with what usually causes that (a
link down, PCIe in place of NVLink, another job on the GPU). A machine without figures
is measured and told so; one rank has no link to measure.

Exit status: 0 when the GPU backend can run (and, with --perf, no row fell below its
figure), 6 when a --perf row fell more than --tolerance below, 7 when the GPU backend
cannot run (the CPU backend always can: symmem run put --backend cpu).`,
		Example: `  symmem check-nvshmem
  symmem check-nvshmem --smoke
  symmem check-nvshmem --perf --nproc 4 --tolerance 10%
  symmem check-nvshmem --json | jq .gpu_backend_ok`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.nprocSet = config.OnCommandLine(cmd.Flags().Lookup("nproc"))
			opts.toleranceSet = config.OnCommandLine(cmd.Flags().Lookup("tolerance"))
			return runCheck(cmd.Context(), opts, streams)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.JSON, "json", false, "print the report as JSON")
	f.BoolVar(&opts.Smoke, "smoke", false, "also run a real 2-rank put on this machine's GPUs")
	f.BoolVar(&opts.Perf, "perf", false, "also run a short key sweep and set it beside symmem's reference figures for this machine")
	f.StringVar(&opts.Tolerance, "tolerance", fmt.Sprintf("%d%%", check.DefaultTolerancePct), "--perf: how far below its reference figure a row may fall before it is named, with its unit")
	f.BoolVarP(&opts.Verbose, "verbose", "v", false, "list every place searched for the NVSHMEM library")
	f.StringVar(&opts.NVSHMEMLib, "nvshmem-lib", "", "path to libnvshmem_host.so.3 (or SYMMEM_NVSHMEM_LIB; default: search)")
	f.StringVar(&opts.NCCLLib, "nccl-lib", "", "path to libnccl.so.2 (or SYMMEM_NCCL_LIB; default: search)")
	f.IntVarP(&opts.NProc, "nproc", "n", 2, "ranks a run would use on this host (under srun, mpirun or torchrun: the ranks it put here)")
	return cmd
}

func runCheck(ctx context.Context, opts *CheckOptions, streams IO) error {
	// One or the other wherever it runs: the sweep of --perf checks every byte it
	// moves, as --smoke's put does, and a rank of srun, mpirun or torchrun starts
	// NVSHMEM once (both there would be two jobs of its ranks).
	if opts.Smoke && opts.Perf {
		return usage("%s and --perf: give one of them (the sweep of --perf checks every byte it moves, as --smoke's put does; a rank of srun, mpirun or torchrun starts NVSHMEM once)", setting.Smoke)
	}
	// --nproc is checked as a job's is, and the launcher found as a job finds it.
	jo := symmem.DefaultJobOptions()
	jo.NProc, jo.Words = opts.NProc, libraryWords
	if err := jo.Check(); err != nil {
		return err
	}
	tol, err := opts.tolerance()
	if err != nil {
		return err
	}
	lib := opts.NVSHMEMLib // SYMMEM_NVSHMEM_LIB reaches it through the settings (config)
	co := check.Options{NVSHMEMLib: lib, NCCLLib: opts.NCCLLib, NProc: opts.NProc, Context: ctx, Words: flagWords}
	place := jo.Where()
	if place.HostRanks > 0 {
		// A job over several hosts needs GPUs for this host's ranks only (srun -N2
		// --ntasks-per-node=1 on hosts of one GPU runs); what keeps it from starting
		// is a failure of its own.
		co.LaunchErr = place.Err
		if !opts.nprocSet {
			co.NProc, co.Launcher = place.HostRanks, place.Launcher
		}
	}
	check.SearchPythonSites(ctx)
	rep := check.Run(machine(), co)
	quiet := !place.Reports
	if opts.Smoke {
		quiet = smoke(ctx, rep, lib, streams.backends()) || quiet
	}
	if opts.Perf {
		quiet = perf(ctx, rep, co.NProc, lib, tol, streams.backends()) || quiet
	}
	if quiet { // a rank other than 0 of an external launcher's job: rank 0 reports
		if !rep.GPUBackendOK {
			return symmem.WithExitCode(symmem.ExitNoGPUBackend, errSilent)
		}
		return nil
	}
	if opts.JSON {
		if err := report.JSON(streams.Out, rep); err != nil {
			return err
		}
	} else {
		printCheck(streams.Out, rep, opts.Verbose)
	}
	below := rep.Perf != nil && rep.Perf.Below > 0
	switch {
	case !rep.GPUBackendOK && opts.JSON:
		return symmem.WithExitCode(symmem.ExitNoGPUBackend, fmt.Errorf("the GPU backend cannot run here (see the failures in the report); the CPU backend can: symmem run put --backend cpu"))
	case !rep.GPUBackendOK:
		return symmem.WithExitCode(symmem.ExitNoGPUBackend, errSilent) // the report's last line said it
	case below && opts.JSON:
		return symmem.WithExitCode(symmem.ExitRegression, fmt.Errorf("%s (see perf in the report)", belowLine(rep.Perf)))
	case below:
		return symmem.WithExitCode(symmem.ExitRegression, errSilent)
	}
	return nil
}

// tolerance is --tolerance in per cent, refused where it is no share of a figure or
// was typed without --perf.
func (o *CheckOptions) tolerance() (float64, error) {
	if o.toleranceSet && !o.Perf {
		return 0, usage("%s is for --perf's rows: add --perf or leave --tolerance out", setting.Tolerance)
	}
	if !o.Perf {
		return 0, nil
	}
	v, err := parsePercent(o.Tolerance)
	if err == nil && v >= 100 {
		err = fmt.Errorf("a row can fall at most 100%% below its figure: give less, such as %d%%", check.DefaultTolerancePct)
	}
	if err != nil {
		return 0, usage("%s %q: %v", setting.Tolerance, o.Tolerance, err)
	}
	return v, nil
}

// smoke runs the seed test through the engine: two ranks on the GPUs (or the ranks of
// the external launcher that started this process), rank 0 puts 5s into rank 1, every
// byte checked. quiet is true on a rank that does not report.
func smoke(ctx context.Context, rep *check.Report, lib string, backends []symmem.Backend) (quiet bool) {
	c := check.Check{Area: "smoke", Name: "2-rank put"}
	if !rep.GPUBackendOK {
		c.Status, c.Detail = check.Info, "skipped: the checks above failed"
		rep.Checks = append(rep.Checks, c)
		return
	}
	start := time.Now()
	var errb bytes.Buffer
	run, quiet, err := smokeRun(ctx, lib, &errb, backends)
	if quiet && err == nil {
		return true
	}
	wall := time.Since(start)
	switch {
	case err == nil && run.OK:
		c.Status = check.OK
		recv := ""
		for _, r := range run.Results {
			if r.Received != "" {
				recv = fmt.Sprintf("rank %d received %s", r.Rank, r.Received)
			}
		}
		c.Detail = fmt.Sprintf("%s; %d wrong; %.2f s wall", recv, run.Wrong, wall.Seconds())
	default:
		c.Status = check.Failure
		c.Detail = strings.TrimSpace(check.LastLines(errb.String(), 3))
		if err != nil {
			c.Detail = strings.TrimSpace(c.Detail + "\n" + err.Error())
		} else {
			c.Detail = strings.TrimSpace(c.Detail + "\n" + run.Failure())
		}
		c.Remedy = "run `symmem run put --backend nvshmem` with NVSHMEM_DEBUG=WARN to see NVSHMEM's reason"
		rep.GPUBackendOK = false
	}
	rep.Smoke = map[string]any{"ok": c.Status == check.OK, "wall_s": wall.Seconds(), "result": run}
	rep.Checks = append(rep.Checks, c)
	return false
}

func smokeRun(ctx context.Context, lib string, errw io.Writer, backends []symmem.Backend) (rep symmem.RunResult, quiet bool, err error) {
	job, err := symmem.NewJob(symmem.JobOptions{NProc: 2, Backend: symmem.NVSHMEM, Timeout: time.Minute, HeapSize: 1 << 30, TagOutput: true,
		NVSHMEMLib: lib, WaitLimit: symmem.DefaultJobOptions().WaitLimit, Backends: backends, Stdout: io.Discard, Stderr: errw,
		Words: libraryWords})
	if err != nil {
		return rep, false, err
	}
	plan, err := job.PlanRun(symmem.RunSpec{Op: "put", DType: "int8", Count: 8, Value: 5, Peer: 1})
	if err != nil {
		return rep, false, err
	}
	out, err := job.Launch(ctx, plan)
	if err != nil || out == nil {
		return rep, !job.Reports(), err
	}
	return *out.Run, false, nil
}

func printCheck(w io.Writer, rep *check.Report, verbose bool) {
	// One line per check, its detail and remedy wrapped beneath, within the tables'
	// width: a table of five columns ran to 174.
	area, name := 0, 0
	for _, c := range rep.Checks {
		area, name = max(area, len(c.Area)), max(name, len(c.Name))
	}
	indent := strings.Repeat(" ", area+name+12)
	cols := report.Columns(w)
	if cols == 0 {
		cols = report.MaxWidth
	}
	width := max(cols-len(indent), 24)
	for _, c := range rep.Checks {
		lines := strings.Split(wrap(c.Detail, width), "\n")
		if c.Remedy != "" {
			lines = append(lines, strings.Split(wrap("fix: "+c.Remedy, width), "\n")...)
		}
		if c.Area == "nvshmem" && rep.Library != nil && rep.LibraryMissing && !verbose {
			lines = append(lines, strings.Split(wrap("(symmem check-nvshmem -v lists every place searched)", width), "\n")...)
		}
		fmt.Fprintf(w, "%-*s  %-*s  %-7s %s\n", area, c.Area, name, c.Name, c.Status, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "%s%s\n", indent, l)
		}
	}
	if tp := rep.Topology; tp != nil && len(tp.GPUs) > 1 {
		m := report.Table{Title: "\nlinks between GPUs (NVML; NV# = NVLinks, else the PCIe path) and peer access (P2P)", Header: []string{""}}
		for j := range tp.GPUs {
			m.Header = append(m.Header, fmt.Sprintf("GPU%d", j))
		}
		for i := range tp.GPUs {
			row := []string{fmt.Sprintf("GPU%d", i)}
			for j := range tp.GPUs {
				cell := "X"
				if i != j {
					cell = fmt.Sprintf("%s %.0fGB/s", tp.Links[i][j].Label(), tp.Links[i][j].GBps)
					if i < len(rep.PeerAccess) && j < len(rep.PeerAccess[i]) && rep.PeerAccess[i][j] {
						cell += " P2P"
					}
				}
				row = append(row, cell)
			}
			m.Rows = append(m.Rows, row)
		}
		m.Print(w)
		for _, n := range tp.Notes {
			fmt.Fprintln(w, "  note: "+n)
		}
	}
	if rep.Library != nil && verbose {
		fmt.Fprintln(w, "\nNVSHMEM host library search, in order:")
		for _, p := range rep.Library.Tried {
			mark := "  "
			if p == rep.Library.Chosen {
				mark = "=>"
			}
			fmt.Fprintf(w, "  %s %s\n", mark, p)
		}
	}
	if len(rep.Env) > 0 {
		e := report.Table{Title: "\nenvironment that changes NVSHMEM or CUDA here", Header: []string{"variable", "value", "meaning"}, Left: true, Wrap: true}
		for _, v := range rep.Env {
			e.Rows = append(e.Rows, []string{v.Name, v.Value, wrap(v.Meaning, 70)})
		}
		e.Print(w)
	}
	if rep.Perf != nil {
		printPerf(w, rep.Perf, cols)
	}
	if rep.GPUBackendOK {
		fmt.Fprintln(w, "\nGPU backend: ready")
	} else {
		report.Note(w, "\nGPU backend: not available here; the CPU backend is (symmem run put --backend cpu)")
	}
	if rep.Perf != nil && rep.Perf.Below > 0 {
		report.Note(w, belowLine(rep.Perf))
	}
}

// wrap breaks long text at spaces so that tables stay readable; a word longer than the
// width (a path) is broken within, so that no line runs past it.
func wrap(s string, width int) string { return report.Fold(report.Wrap(s, width, ""), width) }
