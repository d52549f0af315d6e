package symmem

import (
	"reflect"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/setting"
)

// Every field the table of settings names (setting.Fields, the library's words for
// them) is a field of the library's options or specs, and Run's words name fields of
// Options and Test.
func TestSettingsNameFields(t *testing.T) {
	structs := map[string]reflect.Type{"JobOptions": reflect.TypeFor[JobOptions](), "RunSpec": reflect.TypeFor[RunSpec](),
		"BenchSpec": reflect.TypeFor[BenchSpec](), "Options": reflect.TypeFor[Options](), "Test": reflect.TypeFor[Test]()}
	has := func(path string) bool {
		parts := strings.Split(path, ".")
		typ, ok := structs[parts[0]]
		for _, p := range parts[1:] {
			if !ok {
				return false
			}
			if typ.Kind() == reflect.Pointer {
				typ = typ.Elem()
			}
			var f reflect.StructField
			f, ok = typ.FieldByName(p)
			typ = f.Type
		}
		return ok
	}
	named := 0
	for _, n := range setting.Names() {
		if f := n.Field(); f != "" {
			named++
			if !has(f) {
				t.Errorf("setting %s: no field %s", n, f)
			}
		}
		if f := runWords.Word(n); strings.Contains(f, ".") && !has(f) {
			t.Errorf("setting %s: Run names no field %s", n, f)
		}
	}
	if named == 0 {
		t.Error("the table names no field")
	}
}
