package chamber

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cryochamber/cryochamber/validate"
)

// A user manager too busy to answer in time (issue 23, item 11, its second half). When the
// manager starts after the machine was off, every chamber whose wake passed runs at once: thirty
// sessions, then thirty hibernations that each arm timers and reload the manager. A manager that
// answers slowly then is our own contention, not a reason to stop a plan; but the session's
// hibernation had 60 s (hibernateTimeout) in all, and an arming that outlasted them refused the
// plan ("no timer is armed: the plan has stopped"). Now an arming that fails because the
// manager did not answer in time (or the bus went away) is tried again, each try with its own
// 60 s, for up to armPatience, on a new connection each time; the wake is saved in the state
// first, so a wake killed meanwhile (a shutdown) leaves it for the boot unit. If the manager
// never answers within armPatience, the plan is kept all the same (armed in the state: the
// dead-man armed at the session's start, or the boot unit at the manager's next start, arms it)
// and the operator gets one alert `timer`. A refusal by the manager (a wrong time, a unit it
// will not load) still refuses, as before.

// stopKey is the context value that carries the Done channel of the wake's own context (ended
// by SIGTERM: a shutdown or a logout) into the hibernation, whose context does not end with it.
type stopKey struct{}

// withStop returns hctx carrying the stop of ctx.
func withStop(hctx, ctx context.Context) context.Context {
	return context.WithValue(hctx, stopKey{}, ctx.Done())
}

// stopped reports whether the wake was told to stop (never, when ctx carries no stop).
func stopped(ctx context.Context) <-chan struct{} {
	if ch, ok := ctx.Value(stopKey{}).(<-chan struct{}); ok && ch != nil {
		return ch
	}
	return nil
}

// armPatience bounds the tries; armTryTimeout is one try.
const (
	armPatience   = 5 * time.Minute
	armTryTimeout = hibernateTimeout
)

// managerSlow reports whether err says the manager did not answer in time or went away, rather
// than that it refused.
func managerSlow(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || transientBusError(err)
}

// armPatiently arms the wake for *t (arm) and, when the manager is too slow, tries again (see
// above). A wake that falls due while the manager is silent is armed as soon as possible, as
// the judgement arms a WAKE that passed (judge.go), and *t says when: a transient timer for an
// instant that has passed never fires, and the read-back refused the plan for it (a WAKE a
// few seconds on, and a manager silent longer: TestSilent3_11WakeDueDuringSlowArming). It
// returns the context the rest of the hibernation runs with (a fresh one after a slow arming:
// the first one's time is spent, also for a refusal after it) and its release; an error only
// when the manager refused.
func (r *runner) armPatiently(ctx context.Context, f *finishing, rep *validate.Report, wake *time.Time) (context.Context, context.CancelFunc, error) {
	t := *wake
	try := validate.New(nil)
	err := r.arm(ctx, try, t)
	if err == nil || !managerSlow(err) {
		mergeChecks(rep, try, validate.Fail)
		return ctx, func() {}, err
	}
	began := time.Now()
	r.warnf("the timer manager did not take the next wake in time (%v): it is busy (many chambers at its start?) or restarting; trying again for up to %s", err, armPatience)
	// Saved first: a wake killed while it tries leaves the next wake to the boot unit.
	r.st.Phase, r.st.Wake = PhaseArmed, &t
	if serr := r.save(); serr != nil {
		r.warnf("%v", serr)
	}
	base := context.WithoutCancel(ctx)
	stop := stopped(ctx)
	for tries := 2; ; tries++ {
		r.closeBackend()
		select {
		case <-time.After(time.Duration(min(tries, 10)) * time.Second):
		case <-stop:
			// A shutdown or a logout: the manager is going away, and the wake is in the state
			// for the boot unit of its next start (as for a session cut short: shutdown.go).
			r.warnf("stopped while the timer manager was busy: the next wake, %s, is in the state; the boot unit arms it at the manager's next start", t.Format(time.RFC3339))
			rest, release := context.WithTimeout(base, shutdownArmTimeout)
			mergeChecks(rep, try, validate.Warn)
			return rest, release, nil
		}
		if soon := ceilSecond(r.now().Add(armLead)).UTC(); t.Before(soon) {
			r.warnf("the next wake, %s, fell due while the timer manager was silent: it is armed for %s", t.Format(time.RFC3339), soon.Format(time.RFC3339))
			t, *wake = soon, soon
			r.st.Wake = &soon
		}
		tctx, cancel := context.WithTimeout(base, armTryTimeout)
		try = validate.New(nil)
		err = r.arm(tctx, try, t)
		cancel()
		if err == nil {
			mergeChecks(rep, try, validate.Fail)
			r.warnf("the next wake was armed at try %d, %s late (the timer manager was slow)", tries, time.Since(began).Round(time.Second))
			break
		}
		if !managerSlow(err) && !t.After(r.now()) {
			// The try waited for the manager past the wake it armed (a timer for an instant
			// gone never fires): tried again, now that it answers, for as soon as possible.
			// Only when the instant itself passed during the try: t was armLead ahead when it
			// began, so any refusal after a try of a second would look late against armLead,
			// and a real refusal (a masked unit) was retried as late until armPatience, then
			// kept with no timer in the OS (TestSilent3_11RefusedAfterWakeFellDue).
			if time.Since(began) >= armPatience {
				break // kept, as when it never answers
			}
			continue
		}
		if !managerSlow(err) {
			// Refused: the refusal disarms and alerts, with time of its own (ctx's is spent).
			mergeChecks(rep, try, validate.Fail)
			rest, release := context.WithTimeout(base, hibernateTimeout)
			return rest, release, err
		}
		if time.Since(began) >= armPatience {
			break
		}
	}
	rest, release := context.WithTimeout(base, hibernateTimeout)
	if err != nil {
		// Kept, not refused: a warning in the report, the wake in the state, one alert.
		mergeChecks(rep, try, validate.Warn)
		r.alert(rest, f.n, "timer", fmt.Sprintf("chamber %s: the timer manager did not answer for %s while session %d armed its next wake (%v). The plan is kept: the next wake, %s, is in the state; the dead-man or the boot unit arms it when the manager answers again.",
			r.dir, armPatience, f.n, err, t.Format(time.RFC3339)),
			fmt.Sprintf("once `systemctl --user status` answers, run: cryochamber wake --dir %s --at %s", r.dir, t.Format(time.RFC3339)), nil)
	}
	return rest, release, nil
}

// mergeChecks adds the checks of from to rep; a failure becomes failAs.
func mergeChecks(rep, from *validate.Report, failAs validate.Status) {
	for _, c := range from.Checks {
		st := c.Status
		if st == validate.Fail {
			st = failAs
		}
		rep.Add(c.Step, st, "%s", c.Detail)
	}
}
