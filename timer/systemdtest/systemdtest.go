// Package systemdtest starts a private systemd user manager for tests, so that cryochamber's
// timers are tested against the real thing: real unit parsing, real D-Bus, real timers firing.
//
// `systemd --user` only starts on a system "booted with systemd", which it checks by looking for
// /run/systemd/system/. Each Manager therefore runs in its own mount namespace
// (`unshare -m`) with a private tmpfs on /run holding that directory, and with its own HOME,
// XDG_RUNTIME_DIR and XDG_CONFIG_HOME in fresh temporary directories. It also gets a cgroup of
// its own (a user manager that finds itself in the machine's init.scope would take over the
// machine's cgroup tree and move other processes around), and /dev/console bound to a file in
// its namespace, so nothing it logs reaches the machine's console.
//
// The package never touches the machine's own managers, units or home directory. It needs root,
// unshare(1) and /lib/systemd/systemd; where any is missing, Start skips the test and says why
// (internal/e2e: under CRYO_REQUIRE_E2E=1 that skip is a failure). A manager that is started but
// does not come up, or not within startTimeout, fails the test: a broken manager must not hide
// the end-to-end suite behind skips. Every process it starts is ended by PID when the test ends.
package systemdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e"
	"github.com/cryochamber/cryochamber/timer"
)

// SystemdBinary is the user manager this package starts.
const SystemdBinary = "/lib/systemd/systemd"

// managerBinary is what the script execs as the manager: SystemdBinary, except in the test that
// proves a manager which does not come up fails the test.
var managerBinary = SystemdBinary

// Bounds on every wait, so that a broken manager fails a test instead of hanging it.
const (
	startTimeout = 30 * time.Second // until the private socket answers and startup is done
	stopTimeout  = 10 * time.Second // from SIGTERM to SIGKILL, and again after SIGKILL
	cmdTimeout   = 30 * time.Second // one systemctl call
	pollEvery    = 20 * time.Millisecond
	maxJournal   = 4 << 20 // bytes of each log Journal returns (the tail)
)

// userConf makes units inherit the manager's stdout and stderr (there is no journald in the
// namespace; without it their output would go to /dev/null) so Journal shows it.
const userConf = `[Manager]
DefaultStandardOutput=inherit
DefaultStandardError=inherit
`

// script runs as the manager's process: it moves itself into the manager's cgroups, enters a
// new mount namespace, gives systemd its /run/systemd/system and a console, and becomes
// systemd. Every value comes in through the environment, never spliced into the script.
const script = `set -e
IFS=:
for d in $CRYO_CGROUPS; do echo $$ > "$d/cgroup.procs"; done
unset IFS
exec unshare -m sh -c 'set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/systemd/system
mount --bind "$CRYO_CONSOLE" /dev/console
manager=$CRYO_MANAGER
unset CRYO_CGROUPS CRYO_CONSOLE CRYO_MANAGER
exec "$manager" --user --log-target=console'`

var seq atomic.Int64

// Manager is one private systemd user manager.
type Manager struct {
	Home       string // $HOME of the manager and of Env
	RuntimeDir string // $XDG_RUNTIME_DIR (mode 0700)
	ConfigHome string // $XDG_CONFIG_HOME
	UnitDir    string // $XDG_CONFIG_HOME/systemd/user
	PID        int    // of the running manager; 0 when stopped

	logPath string   // the manager's (and its units') stdout and stderr
	console string   // what the manager writes to its console
	cgroups []string // the manager's cgroup in each hierarchy systemd uses
	path    string   // PATH given to the manager and in Env
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has been waited for
	waitErr error
}

// Start starts a user manager and registers its end with t.Cleanup. It skips the test, with the
// reason, when this machine cannot run one (e2e.Skipf), and fails it when the manager does not
// come up.
func Start(t testing.TB) *Manager {
	t.Helper()
	if reason := unsupported(); reason != "" {
		e2e.Skipf(t, "systemdtest: %s", reason)
	}
	base := t.TempDir()
	if base == "/run" || strings.HasPrefix(base, "/run/") {
		e2e.Skipf(t, "systemdtest: the temporary directory %s is under /run, which the manager's namespace replaces (set TMPDIR elsewhere)", base)
	}
	m := &Manager{
		Home:       filepath.Join(base, "home"),
		RuntimeDir: filepath.Join(base, "runtime"),
		ConfigHome: filepath.Join(base, "config"),
		logPath:    filepath.Join(base, "manager.log"),
		console:    filepath.Join(base, "console.log"),
		path:       os.Getenv("PATH"),
	}
	m.UnitDir = filepath.Join(m.ConfigHome, "systemd", "user")
	if m.path == "" {
		m.path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	for _, d := range []string{m.Home, m.UnitDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(m.RuntimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.ConfigHome, "systemd", "user.conf"), []byte(userConf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.console, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cgs, err := makeCgroups(fmt.Sprintf("cryo-systemdtest-%d-%d", os.Getpid(), seq.Add(1)))
	if err != nil {
		e2e.Skipf(t, "systemdtest: cannot give the manager a cgroup of its own: %v", err)
	}
	m.cgroups = cgs
	t.Cleanup(func() {
		m.kill(t)
		// The manager may also have made cgroups in the v1 controller hierarchies; it removes
		// them when it stops cleanly, not when it is killed.
		extra, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", filepath.Base(m.cgroups[0])))
		if err := removeCgroups(append(m.cgroups, extra...)); err != nil {
			t.Errorf("systemdtest: %v", err)
		}
	})
	m.start(t)
	return m
}

// unsupported says why this machine cannot run a private user manager, or "".
func unsupported() string {
	if os.Geteuid() != 0 {
		return "needs root (to unshare a mount namespace and mount a tmpfs on /run)"
	}
	for _, prog := range []string{"unshare", "mount", "sh"} {
		if _, err := exec.LookPath(prog); err != nil {
			return prog + " is not installed (util-linux)"
		}
	}
	if _, err := os.Stat(SystemdBinary); err != nil {
		return SystemdBinary + " is missing: " + err.Error()
	}
	return ""
}

// makeCgroups creates the manager's cgroup in each hierarchy systemd tracks processes with: the
// unified one (at /sys/fs/cgroup on a pure cgroup v2 system, /sys/fs/cgroup/unified on a hybrid
// one) and the legacy name=systemd one.
func makeCgroups(name string) ([]string, error) {
	var roots []string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		roots = []string{"/sys/fs/cgroup"}
	} else {
		for _, r := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd"} {
			if _, err := os.Stat(filepath.Join(r, "cgroup.procs")); err == nil {
				roots = append(roots, r)
			}
		}
	}
	if len(roots) == 0 {
		return nil, errors.New("no cgroup hierarchy found under /sys/fs/cgroup")
	}
	var made []string
	for _, r := range roots {
		d := filepath.Join(r, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			_ = removeCgroups(made)
			return nil, err
		}
		made = append(made, d)
	}
	return made, nil
}

// removeCgroups kills whatever is left in the cgroups and removes them, deepest first.
func removeCgroups(cgs []string) error {
	var errs []error
	for _, cg := range cgs {
		if _, err := os.Stat(cg); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		// cgroup.kill (cgroup v2, Linux 5.14) ends every process left below, all of them
		// started by this manager.
		if err := os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0); err == nil {
			deadline := time.Now().Add(stopTimeout)
			for time.Now().Before(deadline) && cgroupPopulated(cg) {
				time.Sleep(pollEvery)
			}
		}
		var dirs []string
		_ = filepath.WalkDir(cg, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

func cgroupPopulated(cg string) bool {
	data, err := os.ReadFile(filepath.Join(cg, "cgroup.events"))
	if err != nil {
		return false
	}
	return bytes.Contains(data, []byte("populated 1"))
}

// start runs a manager with the current directories and waits until it answers. A manager
// that does not come up fails the test: unsupported() has already said this machine can run one.
func (m *Manager) start(t testing.TB) {
	t.Helper()
	logf, err := os.OpenFile(m.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- systemdtest: starting %s --user at %s ---\n", managerBinary, time.Now().UTC().Format(time.RFC3339Nano))
	// A manager that stopped cleanly may have removed its (empty) cgroup: make it again.
	for _, cg := range m.cgroups {
		if err := os.MkdirAll(cg, 0o755); err != nil {
			t.Fatalf("systemdtest: the manager's cgroup: %v", err)
		}
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = m.Home
	cmd.Env = append(m.Env(),
		"LANG=C.UTF-8",
		"CRYO_CGROUPS="+strings.Join(m.cgroups, ":"),
		"CRYO_CONSOLE="+m.console,
		"CRYO_MANAGER="+managerBinary,
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("systemdtest: start the manager: %v", err)
	}
	m.cmd, m.PID, m.done = cmd, cmd.Process.Pid, make(chan struct{})
	go func(done chan struct{}) {
		m.waitErr = cmd.Wait()
		close(done)
	}(m.done)

	private := filepath.Join(m.RuntimeDir, "systemd", "private")
	deadline := time.Now().Add(startTimeout)
	for {
		if _, err := os.Stat(private); err == nil {
			break
		}
		select {
		case <-m.done:
			out := m.Journal(t)
			m.PID = 0
			t.Fatalf("systemdtest: the user manager exited before it came up (%v); its output:\n%s", m.waitErr, out)
		case <-time.After(pollEvery):
		}
		if time.Now().After(deadline) {
			m.kill(t)
			t.Fatalf("systemdtest: the user manager did not create %s within %s; its output:\n%s", private, startTimeout, m.Journal(t))
		}
	}
	// Wait for startup to finish, so that tests see a settled manager (timers.target started).
	// (`is-system-running` cannot be used: it answers "offline" whenever it cannot tell
	// whether it runs in a chroot, as in a container where /proc/1/root is out of reach.)
	if _, err := exec.LookPath("systemctl"); err == nil {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		for {
			out, _ := m.systemctl(ctx, "show", "--property=SystemState", "--value")
			state := strings.TrimSpace(string(out))
			if state == "running" || state == "degraded" {
				break
			}
			if time.Now().After(deadline) {
				m.kill(t)
				t.Fatalf("systemdtest: the user manager did not finish starting within %s (state %q); its output:\n%s", startTimeout, state, m.Journal(t))
			}
			time.Sleep(pollEvery)
		}
	}
}

// Env is the environment for a child process that should find this manager: HOME,
// XDG_RUNTIME_DIR, XDG_CONFIG_HOME and PATH (the test's own).
func (m *Manager) Env() []string {
	return []string{
		"HOME=" + m.Home,
		"XDG_RUNTIME_DIR=" + m.RuntimeDir,
		"XDG_CONFIG_HOME=" + m.ConfigHome,
		"PATH=" + m.path,
	}
}

// Options are the backend options that reach this manager (lingering is not checked).
func (m *Manager) Options() timer.SystemdOptions {
	return timer.SystemdOptions{
		UnitDir:    m.UnitDir,
		RuntimeDir: m.RuntimeDir,
		User:       "root",
	}
}

// Stop stops the manager as a shutdown would (SIGTERM, then SIGKILL after a bound) and waits
// for it. HOME and the unit files stay, for Restart.
func (m *Manager) Stop(t testing.TB) {
	t.Helper()
	m.kill(t)
}

func (m *Manager) kill(t testing.TB) {
	t.Helper()
	if m.cmd == nil || m.PID == 0 {
		return
	}
	pid, done := m.PID, m.done
	m.PID = 0
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-done:
		return
	case <-time.After(stopTimeout):
	}
	t.Logf("systemdtest: manager %d did not stop within %s of SIGTERM; sending SIGKILL", pid, stopTimeout)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(stopTimeout):
		t.Errorf("systemdtest: manager %d still running %s after SIGKILL", pid, stopTimeout)
	}
}

// Restart starts a new manager with the same HOME and XDG directories, as after a reboot: the
// runtime directory is emptied (it is a tmpfs that a reboot clears), the unit files and the
// timers' stamps under HOME stay. A running manager is stopped first.
func (m *Manager) Restart(t testing.TB) {
	t.Helper()
	m.kill(t)
	ents, err := os.ReadDir(m.RuntimeDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(m.RuntimeDir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	m.start(t)
}

// Systemctl runs `systemctl --user ARGS...` against this manager and returns its combined
// output. A non-zero exit is logged, not fatal: commands such as is-active report through it.
func (m *Manager) Systemctl(t testing.TB, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("systemctl"); err != nil {
		e2e.Skipf(t, "systemdtest: systemctl is not installed (Debian package systemd)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := m.systemctl(ctx, args...)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		t.Logf("systemctl --user %s: %v", strings.Join(args, " "), err)
	case err != nil:
		t.Fatalf("systemctl --user %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (m *Manager) systemctl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "systemctl", append([]string{"--user", "--no-pager"}, args...)...)
	cmd.Env = append(m.Env(), "LANG=C.UTF-8", "SYSTEMD_COLORS=0")
	cmd.WaitDelay = time.Second
	return cmd.CombinedOutput()
}

// Journal returns what the manager and its units printed (units inherit the manager's stdout
// and stderr: there is no journald in the namespace, and without that setting their output
// would go to /dev/null), then whatever the manager logged to its console (little: at its
// default level a user manager logs almost nothing), each cut to its last few MiB.
func (m *Manager) Journal(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, f := range []struct{ title, path string }{{"output", m.logPath}, {"console", m.console}} {
		data, err := readTail(f.path, maxJournal)
		if err != nil {
			t.Errorf("systemdtest: %v", err)
			continue
		}
		if len(data) == 0 {
			continue
		}
		fmt.Fprintf(&b, "--- %s (%s) ---\n", f.title, f.path)
		b.Write(data)
		if !bytes.HasSuffix(data, []byte("\n")) {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func readTail(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := int64(0)
	if fi.Size() > max {
		off = fi.Size() - max
	}
	buf := make([]byte, fi.Size()-off)
	n, err := f.ReadAt(buf, off)
	if err != nil && n < len(buf) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return buf[:n], nil
}

// WaitFor polls cond every few milliseconds until it returns true or timeout passes, and fails
// the test (with the manager's journal) if it never does.
func (m *Manager) WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("systemdtest: %s: not within %s; manager journal:\n%s", what, timeout, m.Journal(t))
		}
		time.Sleep(pollEvery)
	}
}

// busy says what of the units matching pattern is still at work in the manager: a queued job,
// a service starting, running or stopping, a path unit that has triggered its service. "" is
// idle.
func (m *Manager) busy(ctx context.Context, pattern string) (string, error) {
	var what []string
	jobs, err := m.systemctl(ctx, "list-jobs", "--no-legend", "--plain", pattern)
	if err != nil {
		return "", fmt.Errorf("list-jobs: %v: %s", err, jobs)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(jobs)), "\n") {
		if f := strings.Fields(l); len(f) >= 3 {
			what = append(what, "job "+f[2]+" "+f[1])
		}
	}
	units, err := m.systemctl(ctx, "list-units", "--all", "--no-legend", "--plain", "--type=service,path", pattern)
	if err != nil {
		return "", fmt.Errorf("list-units: %v: %s", err, units)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(units)), "\n") {
		f := strings.Fields(l) // UNIT LOAD ACTIVE SUB DESCRIPTION
		if len(f) < 4 {
			continue
		}
		switch {
		case strings.HasSuffix(f[0], ".service") && f[2] != "inactive" && f[2] != "failed":
			what = append(what, f[0]+" "+f[2]+"/"+f[3])
		case strings.HasSuffix(f[0], ".path") && f[3] == "running":
			what = append(what, f[0]+" triggered")
		}
	}
	return strings.Join(what, ", "), nil
}

// WaitIdle waits until nothing of the units matching pattern (a systemctl pattern such as
// "cryo-*") is at work: no job queued, no service activating, active or deactivating, no path
// unit with its service triggered. It is the positive event to wait for before asserting that
// something did not run: once the manager is idle, whatever it was going to start has started
// and finished. It fails the test if the manager is not idle within timeout.
func (m *Manager) WaitIdle(t testing.TB, timeout time.Duration, pattern string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		// Each question has its own bound: the deadline must not kill a systemctl in the middle
		// and leave "killed" as the last word instead of what is still at work.
		ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
		what, err := m.busy(ctx, pattern)
		cancel()
		if err == nil && what == "" {
			return
		}
		if err != nil {
			what = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("systemdtest: %s still at work after %s: %s; manager journal:\n%s", pattern, timeout, what, m.Journal(t))
		}
		time.Sleep(pollEvery)
	}
}
