package sandbox

import (
	"os/exec"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Start starts cmd (the command line of Wrap) with what the mount and PID namespaces cannot
// give. The network is shared with the cage (the agent reaches its model API), and with it the
// abstract unix sockets, which have no path to hide: a session bus on unix:abstract=... (a
// dbus-launch one, a desktop's, dbus before 1.15), X11's @/tmp/.X11-unix/X0. Where the kernel
// has Landlock's scoping (ABI 6, Linux 6.12), the cage is started in a Landlock domain that
// refuses every connection to an abstract socket made outside it; sockets the session makes
// itself still work. The domain restricts nothing on the file system, so bubblewrap still
// mounts. On an older kernel the cage starts without it (docs/RELIABILITY.md).
//
// The domain is entered by one locked OS thread that starts cmd and is then discarded (its
// goroutine ends without unlocking it): cryochamber itself stays unrestricted. That thread
// lives until bubblewrap has exited: the kernel sends the parent-death signal of
// --die-with-parent when the *thread* that forked a process ends, and a bubblewrap killed
// early (before its child set its own) leaves the cage running, out of reach of the
// process-group kill (TestExecCageKillsAll, TestStartOutlivesItsThread).
func (c *Cage) Start(cmd *exec.Cmd) error {
	if c == nil || c.Mechanism != Bubblewrap || !scopeAbstract() {
		return cmd.Start()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := enterScope(); err != nil {
			done <- &Error{Err: err, Hint: BwrapHint}
			return
		}
		if err := cmd.Start(); err != nil {
			done <- err
			return
		}
		pid := cmd.Process.Pid
		done <- nil
		// Until it exits; WNOWAIT leaves it for cmd.Wait to reap.
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return
			}
		}
	}()
	return <-done
}

// scopeAbstract reports whether the kernel has Landlock's abstract unix socket scope (ABI 6).
func scopeAbstract() bool {
	abi, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	return e == 0 && int(abi) >= 6
}

// enterScope puts the calling thread in a Landlock domain scoped to abstract unix sockets.
// no_new_privs comes first (Landlock requires it; bubblewrap sets it anyway).
func enterScope() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	attr := unix.LandlockRulesetAttr{Scoped: unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if e != 0 {
		return e
	}
	defer unix.Close(int(fd))
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
		return e
	}
	return nil
}
