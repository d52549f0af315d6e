package setting

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"testing"
)

// One error, worded by two presenters: it names its settings by value through every
// error that wraps it (fmt's, and its own with %v) until each presenter words them its
// own way; unworded, it names them in braces; the worded error still unwraps to what
// it wrapped.
func TestWordsOfTwoPresenters(t *testing.T) {
	inner := Errorf("lower %s or %s: %w", MaxSize, Textf("%s %d", Overlap, 2), fs.ErrNotExist)
	err := fmt.Errorf("rank 1: %w", Errorf("%w", inner))
	if got, want := err.Error(), "rank 1: lower {max-size} or {overlap} 2: file does not exist"; got != want {
		t.Errorf("unworded: got %q, want %q", got, want)
	}
	for _, c := range []struct {
		w    Words
		want string
	}{
		{Flags, "rank 1: lower --max-size or --overlap 2: file does not exist"},
		{Fields, "rank 1: lower BenchSpec.MaxSize or BenchSpec.Overlap 2: file does not exist"},
		{nil, "rank 1: lower max-size or overlap 2: file does not exist"},
	} {
		got := c.w.Error(err)
		if got.Error() != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
		if !errors.Is(got, fs.ErrNotExist) {
			t.Errorf("%q: the wrapped error is lost", got)
		}
		// Presented once, an error keeps its words.
		if again := Flags.Error(got); again.Error() != c.want {
			t.Errorf("presented again: %q, want %q", again, c.want)
		}
	}
	// An error formatted with %v is not wrapped, and still named by value.
	if got, want := Flags.Error(Errorf("job: %v", inner)).Error(), "job: lower --max-size or --overlap 2: file does not exist"; got != want {
		t.Errorf("%%v: got %q, want %q", got, want)
	}
	if Flags.Error(nil) != nil {
		t.Error("a nil error worded is not nil")
	}
	plain := errors.New("no settings {here}")
	if Flags.Error(plain) != plain {
		t.Error("an error that names no setting was wrapped")
	}
	if got := Flags.Sprintf("raise %s to %d", HeapSize, 2); got != "raise --heap-size to 2" {
		t.Errorf("Sprintf: %q", got)
	}
}

// The setting a message opens with is found by value, through the errors that wrap
// it where their message opens with its, and after "unknown ".
func TestLead(t *testing.T) {
	named := ""
	for _, c := range []struct {
		err  error
		lead Name
	}{
		{Errorf("%s -5s: must not be negative", Timeout), Timeout},
		{Errorf("unknown %s %q", Backend, "x"), Backend},
		{fmt.Errorf("%w", Errorf("%v", Errorf("%s 0 out of range", NProc))), NProc},
		{Flags.Error(Errorf("%s 0 out of range", NProc)), NProc},
		{fmt.Errorf("rank 1: %w", Errorf("%s 0", NProc)), ""},
		{Errorf("raise %s", HeapSize), ""},
		{errors.New("--count 8"), ""},
		// A message its maker worded (pkg/launch's), and one whose maker takes the name.
		{fmt.Errorf("%w", Opening(errors.New(`unknown --launcher "x"`), Flags, StoreAddr, Launcher)), Launcher},
		{Opening(errors.New(`job spans hosts: give --launcher`), Flags, Launcher), ""},
		{Naming(errorFunc(func() string { return named + " 80: taken" }), StoreAddr, func(s string) { named = s }), StoreAddr},
		{Naming(errorFunc(func() string { return "taken: give " + named }), StoreAddr, func(s string) { named = s }), ""},
	} {
		n, ok := Lead(c.err)
		if n != c.lead || ok != (c.lead != "") {
			t.Errorf("%q: lead %q %v, want %q", c.err, n, ok, c.lead)
		}
	}
}

// An error of a package that takes its caller's name for a setting (pkg/launch's
// Setting fields) is given each presenter's word for it.
func TestNaming(t *testing.T) {
	setting := ""
	limit := errorFunc(func() string { return "ran past " + setting })
	err := fmt.Errorf("job: %w", Naming(limit, Timeout, func(s string) { setting = s }))
	if got := Flags.Error(err).Error(); got != "job: ran past --timeout" {
		t.Errorf("worded: %q", got)
	}
	if got := err.Error(); got != "job: ran past {timeout}" {
		t.Errorf("unworded: %q", got)
	}
}

type errorFunc func() string

func (f errorFunc) Error() string { return f() }

// Every setting has a key of a flag's form, and each field of the library is one
// setting's.
func TestTable(t *testing.T) {
	seen := map[string]Name{}
	for _, n := range Names() {
		if n.String() != "{"+string(n)+"}" {
			t.Errorf("%q unworded is %q", n, n.String())
		}
		if f := n.Field(); f != "" {
			if o, dup := seen[f]; dup {
				t.Errorf("%s sets both %s and %s", f, o, n)
			}
			seen[f] = n
		}
	}
	if !slices.IsSorted(Names()) || len(Names()) != len(fields) {
		t.Errorf("Names: %v", Names())
	}
}
