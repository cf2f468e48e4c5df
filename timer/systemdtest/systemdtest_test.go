package systemdtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e"
)

func TestManagerLifecycle(t *testing.T) {
	var pid int
	var cgroups []string
	t.Run("run", func(t *testing.T) {
		m := Start(t)
		pid, cgroups = m.PID, m.cgroups
		if pid <= 0 {
			t.Fatalf("PID = %d", pid)
		}
		for _, d := range []string{m.Home, m.RuntimeDir, m.ConfigHome, m.UnitDir} {
			if strings.HasPrefix(d, "/run/") {
				t.Errorf("%s is under /run, which the manager's namespace hides", d)
			}
		}
		if fi, err := os.Stat(m.RuntimeDir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("runtime dir: %v, %v; want mode 0700", fi, err)
		}
		if got := strings.TrimSpace(m.Systemctl(t, "show", "--property=SystemState", "--value")); got != "running" && got != "degraded" {
			t.Errorf("SystemState = %q", got)
		}
		// The manager runs in its own cgroup, not in the machine's init.scope.
		data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), filepath.Base(cgroups[0])) {
			t.Errorf("manager cgroups:\n%s\nwant them under %s", data, filepath.Base(cgroups[0]))
		}

		// A unit's output lands in the journal; a unit file survives a restart, the
		// manager's PID does not.
		unit := "[Service]\nType=oneshot\nExecStart=/bin/echo systemdtest-marker\n"
		if err := os.WriteFile(filepath.Join(m.UnitDir, "marker.service"), []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
		m.Systemctl(t, "daemon-reload")
		m.Systemctl(t, "start", "marker.service")
		m.WaitFor(t, 10*time.Second, "marker in the journal", func() bool {
			return strings.Contains(m.Journal(t), "systemdtest-marker\n")
		})

		m.Stop(t)
		if m.PID != 0 {
			t.Errorf("PID after Stop = %d", m.PID)
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("manager %d still exists after Stop: %v", pid, err)
		}
		m.Restart(t)
		if m.PID == 0 || m.PID == pid {
			t.Errorf("PID after Restart = %d (before: %d)", m.PID, pid)
		}
		if got := m.Systemctl(t, "cat", "marker.service"); !strings.Contains(got, "systemdtest-marker") {
			t.Errorf("unit file lost across Restart: %s", got)
		}
		pid = m.PID
	})
	// The subtest's cleanup has ended the manager and removed its cgroups.
	if pid != 0 {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("manager %d survived its test: %v", pid, err)
		}
	}
	for _, cg := range cgroups {
		if _, err := os.Stat(cg); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left behind (%v)", cg, err)
		}
	}
}

// verdictTB records how Start ended a test, and ends the goroutine that called it as the
// testing package would; everything else goes to the real test.
type verdictTB struct {
	*testing.T
	mu              sync.Mutex
	skipped, failed bool
	msg             string
}

func (v *verdictTB) end(skip bool, msg string) {
	v.mu.Lock()
	v.skipped, v.failed, v.msg = skip, !skip, msg
	v.mu.Unlock()
	runtime.Goexit()
}

func (v *verdictTB) Skip(args ...any)                  { v.end(true, fmt.Sprint(args...)) }
func (v *verdictTB) Skipf(format string, args ...any)  { v.end(true, fmt.Sprintf(format, args...)) }
func (v *verdictTB) Fatal(args ...any)                 { v.end(false, fmt.Sprint(args...)) }
func (v *verdictTB) Fatalf(format string, args ...any) { v.end(false, fmt.Sprintf(format, args...)) }

// TestManagerThatDoesNotStartFails: on a machine that can run a user manager, one that exits
// at once (here /bin/false stands in for systemd) fails the test; it is never a skip, which
// would hide every end-to-end test behind a broken manager.
func TestManagerThatDoesNotStartFails(t *testing.T) {
	if reason := unsupported(); reason != "" {
		e2e.Skipf(t, "systemdtest: %s", reason)
	}
	old := managerBinary
	managerBinary = "/bin/false"
	t.Cleanup(func() { managerBinary = old })
	v := &verdictTB{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(v)
	}()
	<-done
	if v.skipped || !v.failed {
		t.Fatalf("Start with a manager that exits: skipped %v failed %v (%s); want a failure", v.skipped, v.failed, v.msg)
	}
	if !strings.Contains(v.msg, "the user manager exited before it came up") {
		t.Errorf("failure message: %s", v.msg)
	}
}

// TestWaitIdle: WaitIdle returns only once a started oneshot service has finished, and fails,
// naming the unit, while one is still running.
func TestWaitIdle(t *testing.T) {
	m := Start(t)
	done := filepath.Join(t.TempDir(), "done")
	units := map[string]string{
		"idletest-short.service": "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'sleep 1; touch " + done + "'\n",
		"idletest-long.service":  "[Service]\nType=oneshot\nTimeoutStartSec=infinity\nExecStart=/bin/sleep 300\n",
	}
	for name, text := range units {
		if err := os.WriteFile(filepath.Join(m.UnitDir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.Systemctl(t, "daemon-reload")
	m.Systemctl(t, "start", "--no-block", "idletest-short.service")
	m.WaitIdle(t, 20*time.Second, "idletest-*")
	if _, err := os.Stat(done); err != nil {
		t.Fatalf("WaitIdle returned before the service finished: %v", err)
	}

	m.Systemctl(t, "start", "--no-block", "idletest-long.service")
	v := &verdictTB{T: t}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		m.WaitIdle(v, 2*time.Second, "idletest-*")
	}()
	<-finished
	if !v.failed || !strings.Contains(v.msg, "idletest-long.service") {
		t.Fatalf("WaitIdle with a running service: failed %v (%s); want a failure naming it", v.failed, v.msg)
	}
	m.Systemctl(t, "stop", "idletest-long.service")
}
