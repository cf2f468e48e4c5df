package binary

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// The slow-manager trials (silent3's TestSilent3_11ManagerSlowAtHibernation, review_e2e_test.go,
// armrefused_e2e_test.go) share one shape: a `wake --now` runs in the background, the user
// manager is stopped (SIGSTOP) once its session 2 has started, and the trial looks at what the
// wake did when the manager answered again.

// wakeResult is how a `wake --now` run in the background ended.
type wakeResult struct {
	code int
	out  string
}

// wakeFrozen starts `wake --now` of c in the background (8 minutes at most) and stops m once
// session 2 has started (the agent writes "ran 2" to runs.txt). It returns the wake's result
// channel and cont, which lets the manager run again (also at the test's end).
func wakeFrozen(t *testing.T, m *systemdtest.Manager, c *trial) (<-chan wakeResult, func()) {
	t.Helper()
	done := make(chan wakeResult, 1)
	go func() {
		code, out, _ := runWithin(t, c.bin, c.env, c.dir, 8*time.Minute, "wake", "--dir", c.dir, "--now")
		done <- wakeResult{code, out}
	}()
	m.WaitFor(t, 60*time.Second, "session 2 to start", func() bool { return strings.Contains(c.file("runs.txt"), "ran 2") })
	pid := m.PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	t.Cleanup(cont)
	return done, cont
}

// maskWakeTimer masks the name of c's wake timer as `systemctl --user mask --runtime` does (the
// manager cannot be asked while stopped): the manager reads the mask when it next loads that
// name, at the arming's retry, and refuses the timer. It returns the mask's path.
func maskWakeTimer(t *testing.T, m *systemdtest.Manager, c *trial) string {
	t.Helper()
	masks := filepath.Join(m.RuntimeDir, "systemd", "user")
	if err := os.MkdirAll(masks, 0o755); err != nil {
		t.Fatal(err)
	}
	mask := filepath.Join(masks, timer.SystemdTimerName(timer.ID(c.dir), timer.Wake))
	if err := os.Symlink("/dev/null", mask); err != nil {
		t.Fatal(err)
	}
	return mask
}
