package cli

import (
	"github.com/symmem/symmem/internal/setting"
)

// flagWords are the CLI's words for the settings the layers below mark ({heap-size}):
// its flags. The CLI presents with them what it prints (Main's errors, the engine's
// notes, tables and reports); nothing else words a setting for it.
var flagWords setting.Words = func(n setting.Name) string { return "--" + string(n) }

// libraryWords are flagWords as the library's JobOptions.Words take them.
func libraryWords(key string) string { return flagWords.Word(setting.Name(key)) }
