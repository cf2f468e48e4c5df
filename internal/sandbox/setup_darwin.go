package sandbox

import (
	"context"
	"fmt"
	"os"
)

// Mechanism is this OS's sandbox, as status names it.
const Mechanism = SandboxExec

// sandboxExec is where macOS keeps it (never looked up on a PATH).
const sandboxExec = "/usr/bin/sandbox-exec"

// Setup is the cage for p on macOS: sandbox-exec with SeatbeltProfile(p).
func Setup(ctx context.Context, pathList, exclude string, p Policy) (*Cage, error) {
	if _, err := os.Stat(sandboxExec); err != nil {
		return nil, &Error{Err: fmt.Errorf("%s is missing", sandboxExec), Hint: OffHint}
	}
	return &Cage{Mechanism: SandboxExec, Tool: sandboxExec, Policy: p}, nil
}

// SetupKnown is Setup: sandbox-exec has no trial run to skip.
func SetupKnown(ctx context.Context, pathList, exclude string, p Policy, known string) (*Cage, error) {
	return Setup(ctx, pathList, exclude, p)
}
