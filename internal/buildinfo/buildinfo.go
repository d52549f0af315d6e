// Package buildinfo says which symmem this is: its version, the commit it was built
// from and when, for `symmem version` and for every result it writes.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version, Commit and CommitTime may be set at link time
// (-ldflags "-X github.com/symmem/symmem/internal/buildinfo.Commit=$(git rev-parse HEAD)");
// where go build stamped the binary from its git checkout (-buildvcs), that wins.
// CommitTime is when the commit was made (go's vcs.time), not when the binary was built.
var (
	Version    = "dev"
	Commit     = ""
	CommitTime = ""
)

// Info is what a binary knows of its build.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	// CommitTime is when Commit was made (RFC 3339, UTC); older results called it
	// "built".
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified,omitempty"` // built from a checkout with changes not committed
	Go         string `json:"go"`
}

// Read is this binary's Info.
func Read() Info {
	in := Info{Version: Version, Commit: Commit, CommitTime: CommitTime, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	if in.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = bi.Main.Version // go install github.com/symmem/symmem/cmd/symmem@v1.2.3
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.time":
			in.CommitTime = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one line `symmem version` starts with: symmem dev (commit 0123456789ab
// of 2026-01-02T03:04:05Z) go1.26.
func (in Info) String() string {
	var parts []string
	if in.Commit != "" {
		c := in.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if in.CommitTime != "" {
			c += " of " + in.CommitTime
		}
		if in.Modified {
			c += " with changes"
		}
		parts = append(parts, "commit "+c)
	} else {
		parts = append(parts, "commit unknown")
	}
	return "symmem " + in.Version + " (" + strings.Join(parts, ", ") + ") " + in.Go + " " + runtime.GOOS + "/" + runtime.GOARCH
}
