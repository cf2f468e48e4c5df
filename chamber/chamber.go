// Package chamber holds one chamber's lifecycle: start, wake, hibernate, cancel, the dead-man
// check, status, and the files behind them.
//
// A chamber is two places. The chamber directory is the agent's: plan.md, NOTES.md, cryo.log,
// the mailbox, and views (timer.json, todo.json) written for the agent to read. Everything in it
// is untrusted input, since an agent that reads untrusted text may write anything there; it is
// only ever opened through internal/confined, and nothing read from it decides what runs, when,
// or who is told. That is decided by the chamber's private state directory
// (Env.StateDir/chambers/<id>/, mode 0700): the state, the TODOs, the lock, the cancel
// tombstone, the accepted configuration and its pins, the environment file, the alert secrets
// and the alerts still to deliver.
//
// Every command is one short process. The lock holder is the only writer of the state and of
// cryo.log; every state change is an atomic file replacement, and the order of operations in a
// wake (docs/DESIGN.md) makes a kill -9 at any point recoverable by the next command. This
// package never reads the environment or $HOME itself, nor the clock for any time it decides
// or records: Env carries them in. (It measures only the bounded wait for a lock with the
// process's clock.)
package chamber

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/timer"
)

// File names inside a chamber.
const (
	LogFile     = "cryo.log"
	NotesFile   = "NOTES.md"
	DefaultPlan = "plan.md"
	PrivateDir  = ".cryo"     // the chamber's runtime files the agent may read (the prompt)
	PromptName  = "prompt.md" // in PrivateDir
)

// Env is what the lifecycle needs from the world outside the chamber.
type Env struct {
	Now     func() time.Time
	Local   *time.Location // the system time zone
	Binary  string         // absolute path of the cryochamber binary the timers will run
	Environ []string       // this process's environment
	PID     int
	Host    string // this machine's name, for alerts
	Stdout  io.Writer
	Stderr  io.Writer
	// Registry is the file listing the chambers this user started (for `ps`); "" disables it.
	Registry string
	// StateDir is the user's cryochamber state directory (~/.local/state/cryochamber): per
	// chamber, the private state (see the package doc), out of the agent's reach.
	StateDir string
	// Checkpoint, when set, is called at named points of a wake ("claimed", "header", "ended",
	// "armed", "state-temp", ...); the crash tests make it kill or pause the process there.
	Checkpoint func(name string)
	// OpenBackend connects to the OS timer manager by name ("" = this OS's default). ctx bounds
	// the connection.
	OpenBackend func(ctx context.Context, name string) (timer.Backend, error)
	// Rand is the random source of jitter (nil: seeded from the clock and the pid).
	Rand *rand.Rand

	// SystemNow is the system's clock, as opposed to Now, which CRYOCHAMBER_NOW moves in the
	// end-to-end tests: what is compared with the times the kernel (or a file server) stamps
	// on files, such as the outbox's (outboxcount.go), where a clock moved ahead would make a
	// change look old. nil: nothing that needs it is cached (the outbox is listed each time).
	SystemNow func() time.Time
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

// warnf prints a warning in the one voice of the CLI, on stderr.
func (e *Env) warnf(format string, args ...any) {
	fmt.Fprintf(e.Stderr, "cryochamber: warning: "+format+"\n", args...)
}

// Kind says what kind of failure an Error is; the CLI maps it to an exit status.
type Kind int

const (
	// Failed is a refusal or a failure: validation refused to hibernate, the agent failed, a
	// timer could not be armed.
	Failed Kind = iota
	// Usage is a mistake on the command line or in cryo.toml, or a directory that is not a
	// chamber.
	Usage
)

// Error is a failure with its kind and a hint for the user.
type Error struct {
	Kind Kind
	Msg  string
	Hint string
	Err  error
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
	return &Error{Kind: Usage, Msg: fmt.Sprintf(format, args...), Hint: hint}
}

func failErr(hint, format string, args ...any) *Error {
	return &Error{Kind: Failed, Msg: fmt.Sprintf(format, args...), Hint: hint}
}

// AbsDir resolves a chamber directory to its canonical path: absolute, clean, and with every
// symlink resolved, so that one chamber has one ID, one set of units and one state whatever
// path reaches it. A directory that does not exist (a chamber that was moved, a mount that is
// not up yet) keeps its absolute path. Paths that cannot be written safely into a unit file or
// plist (newlines and other control characters, invalid UTF-8) are refused, never escaped.
func AbsDir(dir string) (string, error) {
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
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
	if _, err := timer.EscapePath(p); err != nil {
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
		return usageErr("install it (make install puts it in ~/.local/bin), then start again",
			"cryochamber is running from a temporary build (%s): the timers would run a file that `go` deletes", bin)
	}
	if _, err := timer.ExecLine([]string{bin, "wake"}); err != nil {
		return usageErr("install cryochamber in a directory whose path has no quote, backslash or $ (for example ~/.local/bin)",
			"the cryochamber binary %q cannot be run by a timer unit: %v", bin, err)
	}
	return nil
}

func notChamber(dir string) *Error {
	return usageErr(fmt.Sprintf("start one with: cryochamber start %s", filepath.Join(dir, DefaultPlan)),
		"%s is not a chamber (it was never started here)", dir)
}

// exists reports whether p exists (without following a final symlink).
func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// errorsAs is errors.As for a target type, for brevity in switch statements.
func errorsAs[T error](err error) (T, bool) {
	var t T
	ok := errors.As(err, &t)
	return t, ok
}
