package cli

// What bench shows while a sweep runs: its progress on stderr, its rows on stdout.

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/result"
)

// progress shows a sweep's progress on stderr: on a terminal a bar that names the row
// that landed last; elsewhere (a batch job, | tee) a line when an operation's rows
// begin and one every progressEvery, so that a long sweep is not silent to its end.
// A nil progress does nothing.
type progress struct {
	w           io.Writer
	term        bool
	pb          *progressbar.ProgressBar
	op, last    string
	done, total int
	start, said time.Time
}

// progressEvery is how often a sweep without a terminal says where it is.
const progressEvery = 10 * time.Second

func newProgress(job *symmem.Job, w io.Writer, isTerm bool) *progress {
	p := &progress{w: w, term: isTerm, start: time.Now(), said: time.Now()}
	job.Progress = p.update
	return p
}

// update is the engine's Progress: measurements done of total.
func (p *progress) update(done, total int) {
	p.done, p.total = done, total
	switch {
	case p.term && p.pb == nil:
		p.pb = progressbar.NewOptions(total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(p.describe()),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionSetElapsedTime(true))
		p.pb.Set(done)
	case p.term:
		p.pb.Describe(p.describe())
		p.pb.Set(done)
	case time.Since(p.said) >= progressEvery:
		p.said = time.Now()
		fmt.Fprintf(p.w, "bench: %d of %d measurements in %.0f s; last %s\n", done, total, time.Since(p.start).Seconds(), p.last)
	}
}

func (p *progress) describe() string {
	if p.last == "" {
		return "bench"
	}
	return "bench: " + p.last
}

// landed takes rows that just landed: the bar leaves the terminal for them, and an
// operation's first row says the operation began.
func (p *progress) landed(rows []result.Row) {
	if p == nil || len(rows) == 0 {
		return
	}
	if p.pb != nil {
		p.pb.Clear()
	}
	for _, r := range rows {
		if r.Op != p.op && !p.term {
			fmt.Fprintf(p.w, "bench: %s rows landing (%d of %d measurements done, %.0f s)\n", r.Op, p.done, p.total, time.Since(p.start).Seconds())
			p.said = time.Now()
		}
		p.op, p.last = r.Op, r.Label()
	}
}

func (p *progress) stop() {
	if p != nil && p.pb != nil {
		p.pb.Finish()
		p.pb = nil
	}
}

// rowPrinter shows a sweep's rows as they land: tables or CSV as each row comes,
// JSON (one document) once the sweep ends, however it ends.
type rowPrinter struct {
	format string
	w      io.Writer
	table  *result.Stream
	csv    *result.CSVStream
}

func newRowPrinter(w io.Writer, format string) *rowPrinter {
	p := &rowPrinter{format: format, w: w}
	switch format {
	case "":
		p.table = result.NewStream(w)
	case "csv":
		p.csv = result.NewCSVStream(w)
	}
	return p
}

func (p *rowPrinter) add(res result.Result) {
	switch {
	case p.table != nil:
		p.table.Add(res)
	case p.csv != nil:
		p.csv.Add(res)
	}
}

func (p *rowPrinter) finish(res result.Result) error {
	switch {
	case p.table != nil:
		return p.table.Finish(res)
	case p.csv != nil:
		return p.csv.Finish(res)
	}
	return report.JSON(p.w, res)
}
