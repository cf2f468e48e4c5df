//go:build !linux

package sandbox

import "os/exec"

// Start starts cmd (the command line of Wrap). Landlock's abstract socket scope is Linux's;
// macOS has no abstract unix sockets.
func (c *Cage) Start(cmd *exec.Cmd) error { return cmd.Start() }
