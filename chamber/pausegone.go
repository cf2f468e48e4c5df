package chamber

import (
	"context"
	"fmt"
	"time"

	"github.com/cryochamber/cryochamber/timer"
)

// A paused chamber whose directory is gone when its pause ends (renamed while away, a mount not
// up; issue 23, item 10). An armed chamber in that case gets the alert `missing` and a retry;
// a paused one got nothing: the timer that ends the pause had fired, and nothing was armed
// after it. Now the end of the pause is moved to the retry (+5m, +15m, +60m, then every
// slow_retry), the operator is alerted once, and the pause ends as ever once the directory is
// back, keeping the plan's schedule.

// pausedGone handles a wake for a paused chamber whose directory is missing; ok is false when
// the pause has not ended yet (nothing is due: chamberGone says so).
func (r *runner) pausedGone(ctx context.Context) (ok bool, err error) {
	now := r.now()
	if r.st.PausedUntil == nil || now.Before(r.st.PausedUntil.Add(-dueTolerance)) {
		return false, nil
	}
	what := r.chamberMissing()
	first, t := r.missingRetry(now)
	armErr := r.withBackend(ctx, func(be timer.Backend) error {
		fire, err := timer.FireAt(be, t, now)
		if err != nil {
			return err
		}
		if err := be.Arm(ctx, r.timerChamber(), timer.Job{Kind: timer.Wake, At: fire, Argv: r.wakeArgv()}); err != nil {
			return err
		}
		u := fire.UTC()
		r.st.Timers.Wake = &u
		return nil
	})
	if armErr == nil {
		r.st.PausedUntil = &t
	}
	if err := r.save(); err != nil {
		r.warnf("%v", err)
	}
	if first {
		text := fmt.Sprintf("%s. Its pause ended at the time set, but the plan cannot resume. If it is on a file system that is not mounted yet, the end of the pause is tried again at %s.", what, t.Format(time.RFC3339))
		if armErr != nil {
			text += fmt.Sprintf(" (Re-arming failed too: %v.)", armErr)
		}
		r.alert(ctx, r.st.Session+1, "missing", text,
			fmt.Sprintf("if you moved it: cryochamber cancel --dir %s, then cryochamber start NEW/PATH/%s; if it was deleted: cryochamber cancel --dir %s", r.dir, r.planName(), r.dir), nil)
		_ = r.save()
	}
	return true, &Error{Msg: what, Hint: fmt.Sprintf("if you moved it: cryochamber cancel --dir %s, then start it at its new place", r.dir)}
}

// missingRetry counts one more retry of a chamber whose directory is missing (first: the first
// time it was found so) and says when to look again: the fast retries, then every slow_retry.
// The wake of an armed chamber and the end of a pause share it.
func (r *runner) missingRetry(now time.Time) (first bool, at time.Time) {
	first = r.st.Missing == nil
	if first {
		t := now.UTC()
		r.st.Missing = &t
	}
	r.st.Retries++
	delay := r.cfg.SlowRetry.D
	if r.st.Retries <= len(retryDelays) {
		delay = retryDelays[r.st.Retries-1]
	}
	return first, ceilSecond(now.Add(delay)).UTC()
}
