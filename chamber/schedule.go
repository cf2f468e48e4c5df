package chamber

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/validate"
)

// The operator's controls over the schedule: pause (with an optional end), resume, and moving
// the plan's next wake. Pausing keeps the whole schedule in the state (the plan's wake, the
// TODOs, a retry) and removes the timers, the inbox watcher included: messages sent meanwhile
// wait in the inbox and are read after the resume. What fell due during the pause runs once at
// the resume, and its prompt says what was missed.

// ParseWhen reads a time the operator gave (`pause --until`, `wake --at`) with WAKE's grammar:
// absolute in the chamber's zone (or with an offset), or relative to now.
func ParseWhen(s string, loc *time.Location, now time.Time) (time.Time, error) {
	t, err := marker.ParseTime(strings.TrimSpace(s), loc)
	if err != nil {
		return time.Time{}, err
	}
	return ceilSecond(t.Resolve(now).UTC()), nil
}

// ChamberLocation is the time zone the chamber at dir reads times in (its accepted timezone).
func ChamberLocation(ctx context.Context, env *Env, dir string) *time.Location {
	r, _, err := open(ctx, env, dir, openOptions{unlocked: true})
	if err != nil {
		return env.Local
	}
	defer r.close()
	return r.cfg.Location
}

// PauseOptions are the options of `cryochamber pause`.
type PauseOptions struct {
	Dir   string
	Until string // "" = until `resume`
}

// Pause removes the chamber's timers and keeps its schedule.
func Pause(ctx context.Context, env *Env, opts PauseOptions) error {
	r, done, err := open(ctx, env, opts.Dir, openOptions{command: "pause"})
	if err != nil {
		return err
	}
	if done {
		return failErr("run pause again when the session has finished", "a session is running")
	}
	defer r.close()
	now := r.now()
	switch r.st.Phase {
	case PhaseArmed:
	case PhasePaused:
		// As cancel twice: what was asked is already so.
		r.printf("%s is already paused (since %s)%s; `cryochamber resume --dir %s` resumes it", r.dir, fmtTime(r.st.Paused), untilText(r.st.PausedUntil), r.dir)
		return nil
	default:
		return failErr("`cryochamber start --dir "+r.dir+"` starts it again", "the chamber is %s: there is nothing to pause", r.st.Phase)
	}
	var until *time.Time
	if opts.Until != "" {
		t, err := ParseWhen(opts.Until, r.cfg.Location, now)
		if err != nil {
			return usageErr(`give a time like WAKE's: "2026-12-01 09:00", "2026-12-01T09:00+01:00" or "+7d"`, "--until %q: %v", opts.Until, err)
		}
		if !t.After(now) {
			return usageErr("give a time in the future", "--until %s is not in the future", t.Format(time.RFC3339))
		}
		until = &t
	}
	if err := r.removeTimers(ctx); err != nil {
		return &Error{Msg: "cannot remove the timers", Err: err, Hint: backendHint(r.cfg.Backend)}
	}
	alert := r.st.Timers.Alert
	r.st.Timers = Timers{}
	if alert != nil {
		r.armAlertTimer(ctx)
	}
	p := now.UTC().Truncate(time.Second)
	r.st.Phase, r.st.Paused, r.st.PausedUntil = PhasePaused, &p, until
	if until != nil {
		// One timer ends the pause: the wake at that time resumes the chamber. It is armed at the
		// instant the OS can fire (the next whole minute on launchd), like any wake.
		var fire time.Time
		err := r.withBackend(ctx, func(be timer.Backend) error {
			var err error
			if fire, err = timer.FireAt(be, *until, now); err != nil {
				return err
			}
			return be.Arm(ctx, r.timerChamber(), timer.Job{Kind: timer.Wake, At: fire, Argv: r.wakeArgv()})
		})
		if err != nil {
			return &Error{Msg: "cannot arm the timer that ends the pause", Err: err, Hint: "pause without --until, and resume by hand"}
		}
		u := fire.UTC()
		r.st.Timers.Wake = &u
	}
	if err := r.save(); err != nil {
		return err
	}
	r.logNote("paused by the operator" + untilText(until))
	r.heartbeatPause(ctx) // heartbeat.go: no ping is expected while paused; the next session's ping resumes the check
	r.printf("paused %s%s; the schedule is kept (next wake was %s); messages wait in the inbox", r.dir, untilText(until), fmtTime(r.st.Wake))
	return nil
}

func untilText(t *time.Time) string {
	if t == nil {
		return " until `cryochamber resume`"
	}
	return " until " + t.UTC().Format(time.RFC3339)
}

// ResumeOptions are the options of `cryochamber resume`.
type ResumeOptions struct {
	Dir string
}

// Resume re-arms what the pause kept.
func Resume(ctx context.Context, env *Env, opts ResumeOptions) error {
	r, done, err := open(ctx, env, opts.Dir, openOptions{command: "resume"})
	if err != nil {
		return err
	}
	if done {
		return failErr("run resume again in a moment", "the chamber is busy")
	}
	defer r.close()
	if r.st.Phase != PhasePaused {
		return failErr("", "the chamber is %s, not paused", r.st.Phase)
	}
	return r.resume(ctx)
}

// resume ends a pause: the wake the schedule holds is armed again; when it (or TODOs) fell due
// during the pause, the wake is armed at once and its prompt lists what was missed.
func (r *runner) resume(ctx context.Context) error {
	now := r.now()
	var missed []string
	switch w := r.st.Wake; {
	case r.st.PlanWake != nil && !r.st.PlanWake.After(now):
		missed = append(missed, "the plan's wake due "+r.st.PlanWake.UTC().Format(time.RFC3339))
	case w != nil && !w.After(now) && r.st.Reason == WhyRetry:
		missed = append(missed, fmt.Sprintf("the retry of session %d due %s", r.st.Session, w.UTC().Format(time.RFC3339)))
	case w != nil && !w.After(now) && r.st.Reason != WhyTodo:
		missed = append(missed, "the wake due "+w.UTC().Format(time.RFC3339))
	}
	for _, t := range r.loadTodos().Items {
		if t.Status == "pending" && !t.At.After(now) {
			missed = append(missed, fmt.Sprintf("the TODO %q due %s", t.Text, t.At.UTC().Format(time.RFC3339)))
		}
	}
	next := r.st.Wake
	why := r.st.Reason
	if p, w := r.pendingWake(now); p != nil && (next == nil || p.Before(*next)) {
		next, why = p, w
	}
	if next == nil {
		t := now.Add(armLead).Truncate(time.Second).Add(time.Second)
		next, why = &t, WhyPlan
	}
	if len(missed) > 0 {
		t := now.Add(armLead).Truncate(time.Second).Add(time.Second)
		next, why = &t, WhyResume
		w := fmt.Sprintf("The chamber was paused from %s to %s. Missed meanwhile, and run now, once: %s.",
			fmtTime(r.st.Paused), now.UTC().Format(time.RFC3339), strings.Join(missed, "; "))
		r.st.Warnings = append(r.st.Warnings, w)
		r.writeNotice(r.st.Session, now, "resumed", w+"\n")
	}
	rep := validate.New(nil)
	if err := r.arm(ctx, rep, *next); err != nil {
		return &Error{Msg: "cannot arm the timers to resume", Err: err, Hint: strings.Join(rep.Errors, "; ")}
	}
	r.st.Phase, r.st.Wake, r.st.Reason = PhaseArmed, next, why
	r.st.Paused, r.st.PausedUntil = nil, nil
	if err := r.save(); err != nil {
		return err
	}
	r.logNote("resumed by the operator")
	r.printf("resumed %s: next wake at %s (%s)", r.dir, next.In(r.cfg.Location).Format(time.RFC3339), Relative(*next, now))
	if len(missed) > 0 {
		r.printf("missed during the pause, and run now: %s", strings.Join(missed, "; "))
	}
	return nil
}

// moveWake is `wake --at`: the operator moves the plan's next wake to t (read back from the OS
// like any WAKE). A paused chamber keeps the new time for its resume.
func (r *runner) moveWake(ctx context.Context, t time.Time, raw string) error {
	now := r.now()
	switch r.st.Phase {
	case PhaseArmed, PhasePaused:
	default:
		return failErr("`cryochamber start --dir "+r.dir+"` starts it again", "the chamber is %s: it has no wake to move", r.st.Phase)
	}
	if t.Before(now.Add(-r.cfg.LateGrace.D)) {
		return usageErr("give a time in the future", "--at %s is in the past by more than late_grace (%s)", t.Format(time.RFC3339), r.cfg.LateGrace.D)
	}
	if t.Before(now.Add(armLead)) {
		t = now.Add(armLead).Truncate(time.Second).Add(time.Second)
	}
	r.st.PlanWake = &t
	next, why := &t, WhyPlan
	if p, w := r.pendingWake(now); p != nil && p.Before(t) {
		next, why = p, w
	}
	if r.st.Phase == PhasePaused {
		r.st.Wake, r.st.Reason = next, why
		if err := r.save(); err != nil {
			return err
		}
		r.printf("the plan's next wake is now %s; the chamber stays paused until it is resumed", t.In(r.cfg.Location).Format(time.RFC3339))
		return nil
	}
	rep := validate.New(r.out)
	rep.SetWake(t)
	if err := r.arm(ctx, rep, *next); err != nil {
		return &Error{Msg: "cannot arm the moved wake; the previous timers may be gone", Err: err, Hint: "cryochamber status shows what is armed"}
	}
	r.st.Wake, r.st.Reason = next, why
	if err := r.save(); err != nil {
		return err
	}
	r.logNote(fmt.Sprintf("the operator moved the plan's wake to %s (%s)", t.UTC().Format(time.RFC3339), raw))
	r.heartbeatRearm(ctx) // heartbeat.go: the monitor expects the moved wake
	r.printf("the plan's next wake is now %s (%s)", t.In(r.cfg.Location).Format(time.RFC3339), Relative(t, now))
	if next != &t {
		r.printf("something comes before it: %s at %s", why, next.In(r.cfg.Location).Format(time.RFC3339))
	}
	return nil
}
