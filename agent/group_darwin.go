package agent

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// bootIdentity is when the kernel booted (kern.boottime).
func bootIdentity() (string, error) {
	tv, err := unix.SysctlTimeval("kern.boottime")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%06d", tv.Sec, tv.Usec), nil
}

// procStart is when the process started (kern.proc.pid.<pid>, p_starttime).
func procStart(pid int) (string, error) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		return "", err
	}
	if kp.Proc.P_pid != int32(pid) {
		return "", fmt.Errorf("no process %d", pid)
	}
	st := kp.Proc.P_starttime
	return fmt.Sprintf("%d.%06d", st.Sec, st.Usec), nil
}
