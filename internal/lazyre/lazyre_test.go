package lazyre

import "testing"

func TestCompilesOnceOnFirstUse(t *testing.T) {
	re := MustCompile(`^a+$`)
	if first, again := re(), re(); first != again || !first.MatchString("aaa") || first.MatchString("b") {
		t.Errorf("MustCompile: %p then %p, or the pattern does not match as ^a+$", first, again)
	}
	bad := MustCompile(`(`)
	defer func() {
		if recover() == nil {
			t.Error("a bad expression did not panic at its first use")
		}
	}()
	bad()
}
