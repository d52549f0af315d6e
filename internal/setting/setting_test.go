package setting

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

// One error, worded by two presenters: its marks stay in the message through the
// errors that wrap it until each words them its own way; unknown marks stay, and the
// worded error still unwraps to what it wrapped.
func TestWordsOfTwoPresenters(t *testing.T) {
	err := fmt.Errorf("rank 1: %w", Errorf("lower {max-size} or {no-such}: %w", fs.ErrNotExist))
	if got, want := err.Error(), "rank 1: lower {max-size} or {no-such}: file does not exist"; got != want {
		t.Errorf("unworded: got %q, want %q", got, want)
	}
	flags := Words(func(n Name) string { return "--" + string(n) })
	fields := Words(func(n Name) string { return map[Name]string{"max-size": "BenchSpec.MaxSize"}[n] })
	for _, c := range []struct {
		w    Words
		want string
	}{
		{flags, "rank 1: lower --max-size or {no-such}: file does not exist"},
		{fields, "rank 1: lower BenchSpec.MaxSize or {no-such}: file does not exist"},
		{nil, "rank 1: lower max-size or {no-such}: file does not exist"},
	} {
		got := c.w.Error(err)
		if got.Error() != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
		if !errors.Is(got, fs.ErrNotExist) {
			t.Errorf("%q: the wrapped error is lost", got)
		}
	}
	if flags.Error(nil) != nil {
		t.Error("a nil error worded is not nil")
	}
	plain := errors.New("no marks {here}")
	if flags.Error(plain) != plain {
		t.Error("an error without marks was wrapped")
	}
	if got := flags.Sprintf("raise {heap-size} to %d", 2); got != "raise --heap-size to 2" {
		t.Errorf("Sprintf: %q", got)
	}
	if got, want := Mark("heap-size")+" "+Mark("places"), "{heap-size} places"; got != want {
		t.Errorf("Mark: %q, want %q", got, want)
	}
}
