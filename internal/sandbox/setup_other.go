//go:build !linux && !darwin

package sandbox

import (
	"context"
	"fmt"
	"runtime"
)

// Mechanism is this OS's sandbox: none is known.
const Mechanism = "none"

// Setup fails: no sandbox is known on this OS, and a session never runs unconfined silently.
func Setup(ctx context.Context, pathList, exclude string, p Policy) (*Cage, error) {
	return nil, &Error{Err: fmt.Errorf("no sandbox is known on %s", runtime.GOOS), Hint: OffHint}
}

// SetupKnown is Setup: no sandbox is known here.
func SetupKnown(ctx context.Context, pathList, exclude string, p Policy, known string) (*Cage, error) {
	return Setup(ctx, pathList, exclude, p)
}
