// Package examples embeds the example kernel files, so that `symmem kernels example`
// hands an installed binary's users a file to start from.
package examples

import "embed"

// FS holds the example Triton files.
//
//go:embed *.py
var FS embed.FS
