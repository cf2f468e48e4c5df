//go:build unix

package fallback

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the command in its own process group and makes cancelling kill the
// whole group, so a password helper that started children leaves none behind.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
