package cli

import (
	"github.com/symmem/symmem/internal/setting"
)

// flagWords are the CLI's words for the settings a message names by value
// (setting.HeapSize): its flags (--heap-size). The CLI presents with them what it prints (Main's errors, the engine's
// notes, tables and reports); nothing else words a setting for it.
var flagWords = setting.Flags

// libraryWords are flagWords as the library's JobOptions.Words take them.
func libraryWords(key string) string { return flagWords.Word(setting.Name(key)) }
