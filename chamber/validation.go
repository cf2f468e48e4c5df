package chamber

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/validate"
)

// ValidateOptions are the options of `cryochamber validate`.
type ValidateOptions struct {
	Dir string
}

// Validate runs, read-only, every check the next wake runs: the markers of the latest block
// judged as the wake judged them (steps 1 to 3, the pins of programs inside the chamber
// included), the armed timers against the state (4 to 6), the log and the disk (7, 8). Its
// verdict is the next wake's.
func Validate(ctx context.Context, env *Env, opts ValidateOptions, print io.Writer) (*validate.Report, error) {
	r, _, err := open(ctx, env, opts.Dir, openOptions{unlocked: true})
	if err != nil {
		return nil, err
	}
	defer r.close()
	rep := validate.New(print)
	if d := r.checkDrift(); d != nil {
		rep.Warnings = append(rep.Warnings, d.String(r.dir))
	}
	rep.Warnings = append(rep.Warnings, r.agentLineWarnings(r.agentLine())...) // python -m without -I/-P
	rep.Warnings = append(rep.Warnings, r.degradedWarnings()...)               // degraded.go
	if r.fs == nil {
		rep.Add(validate.StepLog, validate.Fail, "%s", r.chamberMissing())
		rep.Finish()
		return rep, nil
	}
	info, cb, err := r.latestBlock()
	if err != nil {
		rep.Add(validate.StepMarkers, validate.Fail, "cannot read the latest block of cryo.log: %v", err)
		rep.Finish()
		return rep, nil
	}
	rep.Session = info.Session
	m, err := r.markersOf(info, cb)
	if err != nil {
		return nil, err
	}
	validAt := env.Now()
	if info.End == nil {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("session %d has no END line yet: it is running, or its process died", info.Session))
	} else {
		validAt = info.End.End
	}
	why := WhyPlan
	if r.st.Last != nil && r.st.Last.Session == info.Session && r.st.Last.Why != "" {
		why = r.st.Last.Why
	}
	// Judge as the session's end judged it, but the wake time against now.
	v := r.judge(rep, m, validAt, why)
	switch {
	case rep.Failed():
		for _, s := range []validate.Step{validate.StepTimer, validate.StepReadback, validate.StepFallback} {
			rep.Add(s, validate.Skip, "the markers are refused (steps 1 to 3): no timer should be armed")
		}
	case r.st.Phase == PhaseComplete || v.next == nil:
		for _, s := range []validate.Step{validate.StepTimer, validate.StepReadback, validate.StepFallback} {
			rep.Add(s, validate.Skip, "plan complete: no timer should be armed")
		}
	case r.st.Phase == PhaseFailed || r.st.Phase == PhaseCancelled || r.st.Phase == PhasePaused:
		why := string(r.st.Phase)
		if r.st.Last != nil && r.st.Last.Reason != "" {
			why += " (" + r.st.Last.Reason + " in session " + fmt.Sprint(r.st.Last.Session) + ")"
		}
		for _, s := range []validate.Step{validate.StepTimer, validate.StepReadback, validate.StepFallback} {
			rep.Add(s, validate.Skip, "the chamber is %s: no timer should be armed", why)
		}
	default:
		r.checkArmed(ctx, rep)
	}
	r.hostChecks(rep)
	r.sandboxCheck(ctx, rep)
	r.checkHeartbeatMonitor(ctx, rep)
	if r.be != nil && r.st.Phase.Active() {
		// What the timer manager warns of (lingering off: the timers stop at logout), as
		// status says it (issue 23, item 16).
		rep.Warnings = append(rep.Warnings, r.be.Warnings(ctx)...)
	}
	rep.Finish()
	return rep, nil
}

// checkArmed is steps 4 to 6 read-only: what the OS has armed against the state, each question
// within busTimeout.
func (r *runner) checkArmed(ctx context.Context, rep *validate.Report) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout+3*busTimeout)
	defer cancel()
	be, err := r.backend(ctx)
	if err != nil {
		rep.Add(validate.StepTimer, validate.Fail, "%v", err)
		return
	}
	want := r.st.Timers.Wake
	if want == nil {
		want = r.st.Wake
	}
	var fire time.Time
	if want != nil {
		fire = *want
	}
	qctx, qcancel := context.WithTimeout(ctx, busTimeout)
	v, err := timer.Check(qctx, be, r.id, timer.Wake, fire)
	qcancel()
	switch {
	case err != nil:
		rep.Add(validate.StepTimer, validate.Fail, "%v", err)
	case !v.Found:
		rep.Add(validate.StepTimer, validate.Fail, "%s has no wake timer for %s", be.Name(), r.id)
	default:
		rep.Add(validate.StepTimer, validate.Pass, "%s %s-wake", be.Name(), r.id)
		switch {
		case want == nil:
			rep.Add(validate.StepReadback, validate.Fail, "the state has no wake time; %s", v.Reading)
		case !v.OK:
			rep.Add(validate.StepReadback, validate.Fail, "%s (the state says %s)", v, want.UTC().Format(time.RFC3339))
		default:
			rep.Add(validate.StepReadback, validate.Pass, "%s", v)
		}
	}
	var fb time.Time
	if r.st.Timers.Fallback != nil {
		fb = *r.st.Timers.Fallback
	}
	qctx, qcancel = context.WithTimeout(ctx, busTimeout)
	v, err = timer.Check(qctx, be, r.id, timer.Fallback, fb)
	qcancel()
	switch {
	case err != nil:
		rep.Add(validate.StepFallback, validate.Warn, "cannot read the dead-man timer: %v", err)
	case !v.Found:
		rep.Add(validate.StepFallback, validate.Warn, "no dead-man timer armed")
	default:
		rep.Add(validate.StepFallback, validate.Pass, "dead-man timer armed: %s", v)
	}
}
