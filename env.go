package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/timer"
)

// newEnv gathers everything the chamber package needs from the process: the clock, the
// environment, the binary's path and the way to reach the OS timer manager.
func newEnv(stdout, stderr io.Writer) *chamber.Env {
	environ := os.Environ()
	exe := binaryPath()
	stateHome := os.Getenv("XDG_STATE_HOME")
	if stateHome == "" {
		if home := os.Getenv("HOME"); home != "" {
			stateHome = filepath.Join(home, ".local", "state")
		}
	}
	stateDir, registry := "", ""
	if stateHome != "" {
		stateDir = filepath.Join(stateHome, "cryochamber")
		registry = filepath.Join(stateDir, "registry")
	}
	env := &chamber.Env{
		Registry: registry,
		StateDir: stateDir,
		Now:      time.Now,
		Local:    time.Local,
		Binary:   exe,
		Environ:  environ,
		PID:      os.Getpid(),
		Host:     hostname(),
		Stdout:   stdout,
		Stderr:   stderr,
	}
	// The system's clock, which CRYOCHAMBER_NOW below leaves alone: compared with file stamps.
	env.SystemNow = time.Now
	env.Checkpoint = checkpointHook(os.Getenv("CRYOCHAMBER_CRASH_AT"), os.Getenv("CRYOCHAMBER_PAUSE_AT"), os.Getenv("CRYOCHAMBER_PAUSE_FILE"))
	if clock := testClock(os.Getenv("CRYOCHAMBER_NOW")); clock != nil {
		env.Now = clock
	}
	env.OpenBackend = func(ctx context.Context, name string) (timer.Backend, error) {
		return openBackend(ctx, env, name)
	}
	return env
}

// binaryPath is the path the timers will run. It keeps the path as invoked when that names this
// very binary (/opt/homebrew/bin/cryochamber, ~/go/bin/cryochamber) instead of resolving
// symlinks: a package upgrade replaces what the link points to and deletes the old target.
func binaryPath() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	arg := os.Args[0]
	if !strings.Contains(arg, "/") {
		if p, err := exec.LookPath(arg); err == nil {
			arg = p
		}
	}
	if abs, err := filepath.Abs(arg); err == nil {
		a, errA := os.Stat(abs)
		b, errB := os.Stat(exe)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return abs
		}
	}
	return exe
}

// checkpointHook is for the crash and race tests (docs/RELIABILITY.md); with neither variable
// set it is nil and does nothing. At a named point of a wake (Env.Checkpoint), the k-th time it
// is reached (default the 1st):
//
//	CRYOCHAMBER_CRASH_AT=point[:k]  the process SIGKILLs itself;
//	CRYOCHAMBER_PAUSE_AT=point[:k]  it writes its PID to $CRYOCHAMBER_PAUSE_FILE and waits until
//	                                that file is removed (at most a minute), then goes on.
func checkpointHook(crashAt, pauseAt, pauseFile string) func(string) {
	crash, pause := reachedNth(crashAt), reachedNth(pauseAt)
	if crash == nil && (pause == nil || pauseFile == "") {
		return nil
	}
	return func(name string) {
		if crash != nil && crash(name) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way; never return into the wake
		}
		if pause != nil && pause(name) && os.WriteFile(pauseFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644) == nil {
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(pauseFile); errors.Is(err, fs.ErrNotExist) {
					return
				}
			}
		}
	}
}

// testClock is a test hook, like the checkpoints: CRYOCHAMBER_NOW=<RFC 3339 instant> makes this
// process's clock start at that instant (and run on from it), so that the end-to-end tests can
// arm real timers for the instants the guardrails give on a night the clocks change
// (guardrails_e2e_test.go). The timers' own services never have it: their environment is the
// unit's.
func testClock(v string) func() time.Time {
	if v == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil
	}
	start := time.Now()
	return func() time.Time { return t.Add(time.Since(start)) }
}

// reachedNth parses "point[:k]" into a function that reports the k-th call with that point.
func reachedNth(spec string) func(string) bool {
	if spec == "" {
		return nil
	}
	point, nth := spec, 1
	if p, k, ok := strings.Cut(spec, ":"); ok {
		point = p
		if n, err := strconv.Atoi(k); err == nil && n > 0 {
			nth = n
		}
	}
	seen := 0
	return func(name string) bool {
		if name != point {
			return false
		}
		seen++
		return seen == nth
	}
}

// openBackend connects to the named timer backend ("" = this OS's default).
func openBackend(ctx context.Context, env *chamber.Env, name string) (timer.Backend, error) {
	if name == "" {
		name = timer.DefaultBackend
	}
	uid := os.Getuid()
	username, known := userName(uid, user.Current, env.Getenv) // env_user.go
	home := env.Getenv("HOME")
	switch name {
	case "systemd":
		cfgHome := env.Getenv("XDG_CONFIG_HOME")
		if cfgHome == "" {
			cfgHome = filepath.Join(home, ".config")
		}
		runtimeDir := env.Getenv("XDG_RUNTIME_DIR")
		if runtimeDir == "" {
			runtimeDir = fmt.Sprintf("/run/user/%d", uid)
		}
		lingerFile := filepath.Join("/var/lib/systemd/linger", username)
		if !known {
			lingerFile = "" // no file is named by a uid: no warning that lingering is off
		}
		return timer.NewSystemd(ctx, timer.SystemdOptions{
			UnitDir:    filepath.Join(cfgHome, "systemd", "user"),
			RuntimeDir: runtimeDir,
			BusAddress: env.Getenv("DBUS_SESSION_BUS_ADDRESS"),
			LingerFile: lingerFile,
			User:       username,
		})
	case "launchd":
		return timer.NewLaunchd(ctx, timer.LaunchdOptions{
			AgentsDir: filepath.Join(home, "Library", "LaunchAgents"),
			UID:       uid,
			// The Mac's zone, not env.Local: launchd reads calendars in the zone /etc/localtime
			// names, whatever $TZ said in the shell that ran start.
			Localtime: "/etc/localtime",
			Env:       env.Environ,
			Now:       env.Now,
		})
	case "slurm":
		// The job scripts live in the private state, which a cluster shares like the chamber.
		if env.StateDir == "" {
			return nil, fmt.Errorf("%w: the slurm backend needs a private state directory (set HOME or XDG_STATE_HOME)", timer.ErrUnavailable)
		}
		return timer.NewSlurm(ctx, timer.SlurmOptions{
			JobDir:  filepath.Join(env.StateDir, "slurm"),
			Environ: env.Environ,
			User:    username,
		})
	case "":
		return nil, fmt.Errorf("%w: no timer backend for %s (cryochamber supports systemd on Linux and launchd on macOS)", timer.ErrUnavailable, runtime.GOOS)
	default:
		return nil, fmt.Errorf("unknown backend %q (want systemd, launchd or slurm)", name)
	}
}

// hostname names this machine in alerts.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// checkBackend refuses an unknown --backend before anything is written.
func checkBackend(name string) error {
	switch name {
	case "", "systemd", "launchd", "slurm":
		return nil
	}
	return &usageError{fmt.Sprintf("unknown backend %q", name), "--backend is systemd (Linux), launchd (macOS) or slurm (a Slurm cluster, docs/CLUSTER.md); leave it out to use this OS's"}
}
