//go:build !unix

package fallback

import "os/exec"

// setProcessGroup is a no-op where there are no process groups: cancelling kills the command only.
func setProcessGroup(*exec.Cmd) {}
