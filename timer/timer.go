// Package timer arms the operating system's own timers that start cryochamber between sessions:
// systemd user units on Linux, launchd agents on macOS.
//
// Between sessions nothing of ours runs, so everything a chamber needs to wake up again lives in
// the files this package installs. The unit and plist builders are plain functions without build
// tags so that Linux tests check both; the backends only talk to the OS manager. This package
// never reads the clock, the environment or $HOME: callers pass times and paths in.
package timer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"time"
)

// Kind is the role of one OS timer of a chamber.
type Kind string

const (
	// Wake starts `cryochamber wake` at the time the agent asked for.
	Wake Kind = "wake"
	// Fallback is the dead-man timer at WAKE + fallback_after: `cryochamber fallback`.
	Fallback Kind = "fallback"
	// Alert retries the delivery of alerts that did not arrive: `cryochamber fallback` again,
	// which delivers what is due before its dead-man check.
	Alert Kind = "alert"
)

// Kinds lists the timer kinds in the order they are armed.
var Kinds = []Kind{Wake, Fallback, Alert}

// Chamber is what the OS needs to know about the chamber that owns the timers.
type Chamber struct {
	ID      string // from ID(Dir): names every unit and label of the chamber
	Dir     string // absolute path of the chamber
	EnvFile string // absolute path of the 0600 environment file (PATH, HOME, agent_env)
	// Env is the environment given literally where the OS has no environment file (launchd's
	// EnvironmentVariables). It holds PATH and HOME only, never a secret.
	Env []string
	// Stdout and Stderr are where launchd writes the job's output (systemd uses the journal).
	Stdout, Stderr string
}

// Job is one OS timer: at At, run Argv.
type Job struct {
	Kind Kind
	At   time.Time // UTC; systemd keeps the second, launchd rounds up to the minute
	Argv []string  // the absolute path of the cryochamber binary first
}

// Installed is one chamber that has timers installed for the current user (for `ps`).
type Installed struct {
	ID    string
	Dir   string // the chamber directory the units point at
	Kinds []Kind // which timers are installed
	Watch bool   // whether an inbox watcher is installed
}

// Backend arms, reads back and removes a chamber's OS timers.
type Backend interface {
	// Name is "systemd" or "launchd".
	Name() string
	// Arm installs (or replaces) the timers of the jobs (one per kind) for c and starts them,
	// in one step where the OS allows it (systemd: one reload of the user manager for all).
	// It does not wait for the timers to fire.
	Arm(ctx context.Context, c Chamber, jobs ...Job) error
	// Next reports the next elapse the OS itself has computed for that timer. ok is false when
	// the timer is not installed or has no next elapse.
	Next(ctx context.Context, id string, k Kind) (t time.Time, ok bool, err error)
	// Disarm stops and removes the timer of one kind. Removing a missing timer is not an error.
	Disarm(ctx context.Context, id string, k Kind) error
	// Watch installs a watcher that starts the wake job when something lands in dir.
	Watch(ctx context.Context, c Chamber, dir string, wakeArgv []string) error
	// Unwatch removes the inbox watcher. Removing a missing watcher is not an error.
	Unwatch(ctx context.Context, id string) error
	// RunNow starts the chamber's wake job at once (`send --wake`).
	RunNow(ctx context.Context, id string) error
	// Installed lists every chamber that has units or plists installed.
	Installed(ctx context.Context) ([]Installed, error)
	// Warnings says what could stop timers from firing (lingering off, for example).
	Warnings(ctx context.Context) []string
	// Close releases the connection to the OS manager.
	Close() error
}

// ErrUnavailable wraps every error that means the OS timer manager cannot be reached at all
// (no user bus, no launchctl), as opposed to a refusal of one request.
var ErrUnavailable = errors.New("timer manager unavailable")

// Prefix starts every unit name and label cryochamber installs.
const Prefix = "cryo-"

// ID names a chamber's units and labels: a readable slug of the directory's base name plus a
// short hash of its absolute path. The same path always gives the same ID, on every build and
// every machine; two chambers with the same base name get different IDs.
func ID(absDir string) string {
	clean := filepath.Clean(absDir)
	sum := sha256.Sum256([]byte(clean))
	return Prefix + slug(filepath.Base(clean)) + "-" + hex.EncodeToString(sum[:4])
}

// slug keeps [a-z0-9] runs of name, joined by single dashes, at most 32 bytes.
func slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			sep := dash && b.Len() > 0
			// Stop before the byte that would pass 32 (a dash and its letter count together,
			// so the slug never ends in a dash).
			if sep && b.Len()+2 > 32 || b.Len()+1 > 32 {
				break
			}
			if sep {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	if b.Len() == 0 {
		return "chamber"
	}
	return b.String()
}
