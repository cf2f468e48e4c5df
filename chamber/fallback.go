package chamber

import (
	"context"
	"fmt"
	"time"

	"github.com/cryochamber/cryochamber/validate"
)

// FallbackOptions are the options of `cryochamber fallback`.
type FallbackOptions struct {
	Dir string
}

// Fallback is what the dead-man timer runs (at WAKE + fallback_after, and at the start of every
// session + fallback_after) and what the alert timer runs. It delivers the alerts whose delivery
// is due, then, if the session for that deadline has not finished, alerts and repairs: a session
// whose process died is recovered, one that hangs is reported, a wake that never ran is re-armed.
// It needs nothing from the chamber: a chamber that is missing, full or sabotaged is reported
// from the private state alone.
func Fallback(ctx context.Context, env *Env, opts FallbackOptions) error {
	pre, _, err := open(ctx, env, opts.Dir, openOptions{unlocked: true, degraded: true})
	if err != nil {
		return err
	}
	s, st, cfg := pre.store, pre.st, pre.cfg
	pre.close()
	overdue := func(st *State) bool {
		return st.Wake != nil && !env.Now().Before(st.Wake.Add(cfg.FallbackAfter.D-dueTolerance))
	}
	if st.Phase == PhaseArmed && overdue(st) {
		// After a boot or resume both timers fire at once: give the wake a moment to start.
		waitForWake(ctx, s, st)
	}
	r, done, err := open(ctx, env, opts.Dir, openOptions{command: "fallback", degraded: true})
	if err != nil {
		return err
	}
	if done {
		return hungCheck(ctx, env, opts.Dir)
	}
	defer r.close()
	if r.fs == nil {
		return r.chamberGone(ctx)
	}
	now := r.now()
	switch {
	case r.st.Phase == PhaseRunning:
		// Its process died (a kill -9, an OOM kill, a crash), whatever woke it. Alert, then
		// repair the way the next wake would.
		r.alert(ctx, r.st.Session, "crashed", fmt.Sprintf("session %d (due %s, %s) did not finish: its process died.", r.st.Session, fmtTime(r.st.Wake), r.st.Reason),
			"nothing: it is being recovered now (retried, or re-armed); `cryochamber status --dir "+r.dir+"` shows the result", nil)
		_, err := r.recover(ctx)
		return err
	case r.st.Phase == PhaseArmed && overdue(r.st):
		due := *r.st.Wake
		t := now.Add(armLead).Truncate(time.Second).Add(time.Second)
		cause := "no timer fired, or the machine was off"
		if b := r.st.Binary; b != "" && !exists(b) {
			cause = fmt.Sprintf("the wake timer runs %s, which is gone (removed or moved by an upgrade?)", b)
		}
		text := fmt.Sprintf("the wake due at %s did not run (session %d never started): %s. It is re-armed for %s.",
			due.Format(time.RFC3339), r.st.Session+1, cause, t.Format(time.RFC3339))
		resume := "nothing, if the re-armed wake runs; `cryochamber status --dir " + r.dir + "` shows it"
		if err := r.arm(ctx, validate.New(nil), t); err != nil {
			text = fmt.Sprintf("the wake due at %s did not run (session %d never started): %s; and it could not be re-armed: %v.",
				due.Format(time.RFC3339), r.st.Session+1, cause, err)
			resume = fmt.Sprintf("cryochamber wake --dir %s --now", r.dir)
		} else {
			r.st.Wake = &t
		}
		if err := r.save(); err != nil {
			r.warnf("%v", err)
		}
		if a := r.st.LastAlert; a != nil && a.Reason == "missed" && a.Session == r.st.Session+1 {
			r.printf("%s (already alerted)", text)
			return r.save()
		}
		r.alert(ctx, r.st.Session+1, "missed", text, resume, nil)
		return r.save()
	case r.st.Phase == PhaseArmed:
		// Not due: the dead-man (on launchd a periodic check) also keeps the wake timer right,
		// re-arming it when the OS lost it or the machine's zone changed.
		r.repairWakeTimer(ctx)
	}
	// Nothing is due: say nothing (on launchd this check runs every ten minutes, and its output
	// goes to a file).
	return r.save()
}

// hungCheck is the dead-man check while a session holds the lock: it alerts when that session
// has been running longer than fallback_after (it hangs, or the agent is stuck), without
// touching the state the session owns.
func hungCheck(ctx context.Context, env *Env, dir string) error {
	r, _, err := open(ctx, env, dir, openOptions{unlocked: true})
	if err != nil {
		return err
	}
	defer r.close()
	h := r.st.Holder
	now := r.now()
	if r.st.Phase != PhaseRunning || h == nil || now.Before(h.Since.Add(r.cfg.FallbackAfter.D-dueTolerance)) {
		r.printf("%s (no alert: it is not overdue)", holderMessage(r.store, now))
		return nil
	}
	flag := fmt.Sprintf("overdue-%d", r.st.Session)
	if r.store.flag(flag) {
		r.printf("%s (already alerted: it is overdue)", holderMessage(r.store, now))
		return nil
	}
	_ = r.store.setFlag(flag, now)
	r.unlocked = false // delivers as a holder would, yet never saves: the lock and the state are the running session's
	text := fmt.Sprintf("session %d (due %s) is still running after fallback_after (%s): pid %d since %s. It is killed at session_timeout (%s) and then retried.",
		r.st.Session, fmtTime(r.st.Wake), r.cfg.FallbackAfter.D, h.PID, h.Since.Format(time.RFC3339), r.cfg.SessionTimeout.D)
	r.alert(ctx, r.st.Session, "overdue", text, fmt.Sprintf("look at `cryochamber log --dir %s --follow`; to stop it: kill %d", dir, h.PID), nil)
	return nil
}

// waitForWake gives a wake that fired together with the dead-man timer up to 30 s to take the
// chamber (the session starts, or its number moves on).
func waitForWake(ctx context.Context, s store, st *State) {
	for i := 0; i < 60; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		now, err := s.load()
		if err != nil || now.Phase != PhaseArmed || now.Session != st.Session || !now.Wake.Equal(*st.Wake) {
			return
		}
	}
}
