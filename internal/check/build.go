package check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/kernelbuild"
)

// buildToolsTimeout bounds the check's Python (it imports Triton, a second or two).
var buildToolsTimeout = 30 * time.Second

// RealBuildTools asks the build script this binary embeds what a build of a user's
// kernels would use here (build-kernels.py --check-tools), or why it cannot run.
func RealBuildTools(ctx context.Context) (BuildTools, error) {
	var t BuildTools
	py, err := exec.LookPath("python3")
	if err != nil {
		return t, errors.New("python3 is not on the PATH")
	}
	script, cleanup, err := kernelbuild.WriteScript()
	if err != nil {
		return t, err
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(ctx, buildToolsTimeout)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := kernelbuild.PythonCommand(ctx, py, script, "--check-tools")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return t, fmt.Errorf("%s took more than %s to import Triton and the NVSHMEM wheel", py, buildToolsTimeout)
		}
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
		if msg := kernelbuild.LastLine(errb.String()); msg != "" {
			return t, errors.New(msg)
		}
		return t, fmt.Errorf("%s build-kernels.py --check-tools: %w", py, err)
	}
	// The answer is the last line (an import may print before it).
	if err := json.Unmarshal([]byte(kernelbuild.LastLine(out.String())), &t); err != nil || t.Triton == "" {
		return t, fmt.Errorf("the build script's answer is not what symmem reads: %q", strings.TrimSpace(out.String()))
	}
	return t, nil
}
