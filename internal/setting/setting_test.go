package setting

import (
	"errors"
	"io/fs"
	"testing"
)

// Without words installed a marked setting reads as its bare name; with them, as
// they say; unknown marks and the wrapped error stay as they were.
func TestExpand(t *testing.T) {
	err := Errorf("lower {max-size} or {no-such}: %w", fs.ErrNotExist)
	if got, want := err.Error(), "lower max-size or {no-such}: file does not exist"; got != want {
		t.Errorf("bare: got %q, want %q", got, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("the wrapped error is lost")
	}
	if got := Word("places"); got != "places" {
		t.Errorf("Word of an unknown name: %q", got)
	}
	Use(func(n Name) string { return "--" + string(n) })
	t.Cleanup(func() { words.Store(nil) })
	if got, want := err.Error(), "lower --max-size or {no-such}: file does not exist"; got != want {
		t.Errorf("worded: got %q, want %q", got, want)
	}
	if got := Sprintf("raise {heap-size} to %d", 2); got != "raise --heap-size to 2" {
		t.Errorf("Sprintf: %q", got)
	}
	if got := Word("places"); got != "places" {
		t.Errorf("Word of an unknown name once worded: %q", got)
	}
}
