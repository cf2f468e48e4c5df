// Package timer arms the operating system's own timers that start cryochamber between sessions:
// systemd user units on Linux, launchd agents on macOS, or batch jobs of a Slurm cluster
// (slurm.go, backend = "slurm").
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
	"fmt"
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
	// EnvironmentVariables). It holds PATH, HOME and XDG_STATE_HOME only, never a secret.
	Env []string
	// Stdout and Stderr are where launchd writes the job's output (systemd uses the journal).
	Stdout, Stderr string
	// Boot is what the OS runs at every start of the user manager (the wake: it runs a wake
	// missed while the machine was off, and re-arms the timers a reboot removed). systemd only
	// (`<ID>-boot.service`), whose timers do not outlive the manager; launchd loads its agents
	// again at login. Empty: the Argv of the Wake job armed, if any.
	Boot []string
	// Cluster are the chamber's own options for a cluster scheduler (Slurm: the #SBATCH lines
	// from cryo.toml's [slurm], "--partition=gpu"); the other backends ignore them.
	Cluster []string
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
	// WatchStopped: the watcher is installed but the OS does not run it (systemd: its path unit
	// is not active: stopped by hand, or failed at its trigger limit). Messages then wait for
	// the next wake, which starts it again.
	WatchStopped bool
}

// Backend arms, reads back and removes a chamber's OS timers.
type Backend interface {
	// Name is "systemd", "launchd" or "slurm".
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

// What a backend can say beyond Backend.
//
// These are optional interfaces, so that a backend that cannot say more (systemd: its Next is
// already exact to the second, in UTC) needs no change; the package functions below fall back
// to Next. The chamber calls the functions, never the interfaces.

// Reading is what the OS holds for one timer, read back from the OS itself: what validation
// step 5 compares and what `status` shows.
type Reading struct {
	Backend string // "systemd", "launchd" or "slurm"
	// Next is the next instant the OS will start the timer's job, year included, in UTC. It is
	// zero for a periodic timer.
	Next time.Time
	// Every is the period of a periodic timer (launchd's dead-man check), zero otherwise.
	Every time.Duration
	// Precision is the step the OS schedules in: a timer armed for t fires at t rounded up to
	// it (time.Second on systemd, time.Minute on launchd).
	Precision time.Duration
	// Yearly is true when the schedule repeats every year (launchd's calendar has no year): a
	// timer more than a year ahead first fires at an earlier yearly repeat, whose run re-arms.
	Yearly bool
	// Zone names the time zone the OS reads the schedule in ("UTC" where it is written in UTC;
	// on a Mac the zone /etc/localtime names, whatever $TZ says); Loc is that zone.
	Zone string
	Loc  *time.Location
	// Held is the schedule in the OS's own terms: "03-08 09:00" (a launchd calendar),
	// "every 10m0s" (launchd's StartInterval), "" where Next says it all.
	Held string
}

// String says what was read: "launchd holds 03-08 09:00 (Europe/Berlin) → next
// 2026-03-08T08:00Z".
func (r Reading) String() string {
	name := r.Backend
	if name == "" {
		name = "the OS"
	}
	held := r.Held
	if held == "" && !r.Next.IsZero() {
		held = formatInstant(r.Next, r.Precision)
	}
	s := name + " holds " + held
	if r.Zone != "" && r.Held != "" && r.Every == 0 {
		s += " (" + r.Zone + ")"
	}
	if !r.Next.IsZero() {
		s += " → next " + formatInstant(r.Next, r.Precision)
	}
	return s
}

// formatInstant writes t in UTC, without seconds when the OS schedules in whole minutes.
func formatInstant(t time.Time, precision time.Duration) string {
	if precision >= time.Minute && t.Second() == 0 && t.Nanosecond() == 0 {
		return t.UTC().Format("2006-01-02T15:04Z07:00")
	}
	return t.UTC().Format(time.RFC3339)
}

// Reader is a backend that can say what it holds, not only when it fires next.
type Reader interface {
	Read(ctx context.Context, id string, k Kind) (r Reading, ok bool, err error)
}

// Read reads one timer back from the OS. ok is false when the OS has no such timer. A backend
// that is not a Reader is read through Next, to the second, in UTC.
func Read(ctx context.Context, be Backend, id string, k Kind) (Reading, bool, error) {
	if rd, ok := be.(Reader); ok {
		return rd.Read(ctx, id, k)
	}
	t, ok, err := be.Next(ctx, id, k)
	if err != nil || !ok {
		return Reading{}, ok, err
	}
	// systemd's next elapse is in microseconds; its timers are written to the second.
	return Reading{Backend: be.Name(), Next: t.UTC().Truncate(time.Second), Precision: time.Second, Zone: "UTC", Loc: time.UTC}, true, nil
}

// Planner is a backend whose timers cannot fire at any instant asked for.
type Planner interface {
	FireAt(want, now time.Time) (time.Time, error)
}

// FireAt is the instant at which a timer armed now for want will fire: want rounded up to what
// the OS can express (the second on systemd; on launchd the minute, past a repeated hour, and
// at least a few seconds after now, so that a wake whose minute has begun is not left to fire
// a year later). The chamber arms Job.At = FireAt(want, now) and checks that instant.
func FireAt(be Backend, want, now time.Time) (time.Time, error) {
	if p, ok := be.(Planner); ok {
		return p.FireAt(want, now)
	}
	if want.IsZero() {
		return time.Time{}, errors.New("no time given")
	}
	s := want.Truncate(time.Second)
	if s.Before(want) {
		s = s.Add(time.Second)
	}
	return s.UTC(), nil
}

// Verdict is validation step 5 for one timer: whether the OS will start it when it must.
type Verdict struct {
	Reading
	Found bool      // the OS has the timer
	Want  time.Time // the instant it must fire (FireAt of the wanted time)
	OK    bool
	// Checkpoint: OK because the OS first fires a yearly repeat before Want (launchd, a wake
	// more than a year ahead); that run finds nothing due and re-arms.
	Checkpoint bool
}

// String is what step 5 prints.
func (v Verdict) String() string {
	if !v.Found {
		return fmt.Sprintf("%s has no such timer", v.Backend)
	}
	s := v.Reading.String()
	switch {
	case v.Every > 0:
		return s + ": a periodic check"
	case v.Checkpoint:
		return s + ", a yearly repeat before the wake at " + formatInstant(v.Want, v.Precision) + " (that run re-arms)"
	case !v.OK:
		return s + ", want " + formatInstant(v.Want, v.Precision)
	}
	return s
}

// Check reads timer k of chamber id back and compares the instant the OS will fire it, year
// included, with fire, the instant it must fire at (FireAt). A periodic timer passes when it
// is installed. It never compares wall clocks: a calendar whose next match is a year late, or
// an hour off because the zone is not the one it was computed in, fails.
func Check(ctx context.Context, be Backend, id string, k Kind, fire time.Time) (Verdict, error) {
	r, ok, err := Read(ctx, be, id, k)
	if r.Backend == "" {
		r.Backend = be.Name()
	}
	v := Verdict{Reading: r, Found: ok, Want: fire.UTC()}
	if err != nil || !ok {
		return v, err
	}
	switch {
	case r.Every > 0:
		v.OK = true
	case r.Next.Equal(fire):
		v.OK = true
	case r.Yearly && r.Loc != nil && r.Next.Before(fire) && fire.Sub(r.Next) > 300*24*time.Hour:
		// The same wall-clock minute in an earlier year: launchd cannot say which year.
		a, b := r.Next.In(r.Loc), fire.In(r.Loc)
		if a.Month() == b.Month() && a.Day() == b.Day() && a.Hour() == b.Hour() && a.Minute() == b.Minute() {
			v.OK, v.Checkpoint = true, true
		}
	}
	return v, nil
}

// Preflighter is a backend that can tell, before a session runs, that it will not be able to
// arm timers here at all (launchd: nobody is logged in to the Mac's desktop).
type Preflighter interface {
	Preflight(ctx context.Context) error
}

// Preflight is what `start` calls before session 1: an error (a *HintError where the user can
// do something) means no timer could be armed after the session.
func Preflight(ctx context.Context, be Backend) error {
	if p, ok := be.(Preflighter); ok {
		return p.Preflight(ctx)
	}
	return nil
}

// Adviser is a backend with something the user must leave as it is for the timers to run.
type Adviser interface {
	Advice() []string
}

// Advice is what `start` tells the user to leave on (launchd: the Login Items switch, staying
// logged in). It is not a warning: nothing is wrong yet.
func Advice(be Backend) []string {
	if a, ok := be.(Adviser); ok {
		return a.Advice()
	}
	return nil
}

// HintError is a refusal of the OS timer manager that the user can do something about.
type HintError struct {
	Err  error
	Hint string // what to do, one sentence, for `hint:`
}

func (e *HintError) Error() string { return e.Err.Error() }
func (e *HintError) Unwrap() error { return e.Err }

// ErrNoSession wraps the errors that mean the user has no session the timers can live in
// (launchd: no GUI login, so no gui/<uid> domain).
var ErrNoSession = errors.New("no login session for the timers")

// ErrDisabled wraps the errors that mean the OS was told not to run this timer (launchd:
// `launchctl disable`, listed by `launchctl print-disabled`).
var ErrDisabled = errors.New("timer disabled in the OS")
