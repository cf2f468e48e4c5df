// Package chamber holds one chamber's files (cryo.toml, timer.json, the lock, the environment
// file) and its lifecycle: start, wake, hibernate, cancel, fallback, status.
//
// Every command is one short process. The lock holder is the only writer of timer.json and
// cryo.log; every state change is an atomic file replacement, and the order of operations in a
// wake (docs/DESIGN.md) makes a kill -9 at any point recoverable by the next command. This
// package never reads the clock, the environment or $HOME itself: Env carries them in.
package chamber

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/timer"
)

// File names inside a chamber.
const (
	LogFile      = "cryo.log"
	NotesFile    = "NOTES.md"
	DefaultPlan  = "plan.md"
	EnvFileName  = "env"       // in PrivateDir
	PromptName   = "prompt.md" // in PrivateDir
	CancelledTag = "cancelled" // in PrivateDir: a cancel that a running session must honour
	WakeRequest  = "wake-request"
)

// Env is what the lifecycle needs from the world outside the chamber.
type Env struct {
	Now     func() time.Time
	Local   *time.Location // the system time zone
	Binary  string         // absolute path of the cryochamber binary the timers will run
	Environ []string       // this process's environment
	PID     int
	Stdout  io.Writer
	Stderr  io.Writer
	// Registry is the file listing the chambers this user started (for `ps`); "" disables it.
	Registry string
	// StateDir is the user's cryochamber state directory (~/.local/state/cryochamber): per
	// chamber, the environment file, the alert secrets and the accepted configuration, out of
	// the agent's reach.
	StateDir string
	// Checkpoint, when set, is called at named points of a wake ("claimed", "header", "ended",
	// "armed", "state-temp"); the crash tests make it kill the process there.
	Checkpoint func(name string)
	// OpenBackend connects to the OS timer manager by name ("" = this OS's default).
	OpenBackend func(ctx context.Context, name string) (timer.Backend, error)
}

// checkpoint reports reaching a named point of a wake (see Env.Checkpoint).
func (e *Env) checkpoint(name string) {
	if e.Checkpoint != nil {
		e.Checkpoint(name)
	}
}

// Getenv looks a variable up in Env.Environ.
func (e *Env) Getenv(k string) string {
	v, _ := lookupEnv(e.Environ, k)
	return v
}

// Error is a failure with the exit status the CLI should use and a hint for the user.
type Error struct {
	Status int // 1: refused or failed; 2: usage or configuration
	Msg    string
	Hint   string
	Err    error
}

func (e *Error) Error() string {
	if e.Err != nil && e.Msg == "" {
		return e.Err.Error()
	}
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

func usageErr(hint, format string, args ...any) *Error {
	return &Error{Status: 2, Msg: fmt.Sprintf(format, args...), Hint: hint}
}

func failErr(hint, format string, args ...any) *Error {
	return &Error{Status: 1, Msg: fmt.Sprintf(format, args...), Hint: hint}
}

// AbsDir resolves a chamber directory to an absolute, clean path and refuses paths that cannot be
// written safely into a unit file or plist (newlines and other control characters, invalid
// UTF-8): those are refused, never escaped.
func AbsDir(dir string) (string, error) {
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := checkPath(abs); err != nil {
		return "", err
	}
	return abs, nil
}

func checkPath(p string) error {
	hint := "move the chamber to a directory whose path has no newline or control character"
	if _, err := timer.QuoteExec(p); err != nil {
		return usageErr(hint, "chamber path %q cannot be used in a timer unit: %v", p, err)
	}
	if _, err := timer.EscapeGlobPath(filepath.Join(p, PrivateDir, EnvFileName)); err != nil {
		return usageErr(hint, "chamber path %q cannot be used in a timer unit: %v", p, err)
	}
	if strings.HasSuffix(p, " ") || strings.HasSuffix(p, "\\") {
		return usageErr("rename the directory", "chamber path %q ends in a space or backslash", p)
	}
	return nil
}

// checkBinary refuses a cryochamber binary whose path a unit file cannot name, or that will not
// be there when the timer fires.
func checkBinary(bin string) error {
	if strings.Contains(bin, "/go-build") || strings.Contains(bin, "/go/pkg/mod/") {
		return usageErr("install it (go install, or make build and copy bin/cryochamber to ~/.local/bin), then start again",
			"cryochamber is running from a temporary build (%s): the timers would run a file that `go` deletes", bin)
	}
	if _, err := timer.ExecLine([]string{bin, "wake"}); err != nil {
		return usageErr("install cryochamber in a directory whose path has no quote, backslash or $ (for example ~/.local/bin)",
			"the cryochamber binary %q cannot be run by a timer unit: %v", bin, err)
	}
	return nil
}

// IsChamber reports whether dir has been started at least once (it has a timer.json).
func IsChamber(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, StateFile))
	return err == nil
}

func notChamber(dir string) *Error {
	return usageErr(fmt.Sprintf("start one with: cryochamber start %s", filepath.Join(dir, DefaultPlan)),
		"%s is not a chamber (no %s)", dir, StateFile)
}

// loadForCommand opens the configuration and state of an existing chamber, mapping errors to
// what the CLI shows.
func loadForCommand(dir string, env *Env) (*Config, *State, error) {
	if !IsChamber(dir) {
		return nil, nil, notChamber(dir)
	}
	cfg, err := LoadConfig(dir, env.Local)
	if err != nil {
		return nil, nil, &Error{Status: 2, Err: err, Hint: "fix cryo.toml (`cryochamber init` in an empty directory shows every key with its default)"}
	}
	st, err := LoadState(dir)
	if err != nil {
		if errors.Is(err, ErrNoState) {
			return nil, nil, notChamber(dir)
		}
		return nil, nil, &Error{Status: 1, Err: err, Hint: "timer.json is written atomically; if it was edited by hand, restore it, or remove it and run `cryochamber cancel --dir " + dir + "` then `start` again (the log is kept)"}
	}
	// Unit names always come from the path, never from timer.json, which the agent could edit
	// to make us arm or remove another chamber's timers.
	st.ID = timer.ID(dir)
	return cfg, st, nil
}

func human(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		s = fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
	if neg {
		return s + " ago"
	}
	return "in " + s
}

// Relative prints how far t is from now ("in 2h05m", "3m10s ago").
func Relative(t, now time.Time) string { return human(t.Sub(now)) }
