package chamber

import (
	"context"
	"fmt"
	"time"

	"github.com/cryochamber/cryochamber/validate"
)

// A session cut short by a shutdown or a logout (issue 23, item 13). The user manager stops the
// wake with SIGTERM and, soon after, goes away with its bus and every transient timer. Treated
// as an ordinary failure, the retry was armed against a manager that no longer answered, the
// arming failed, and the plan was refused ("fix the cause, then start"): an ordinary reboot
// ended it. The README promises that an outage never ends a plan, so:
//
//   - the state is saved first, before any word to the bus: armed, the retry due a minute after
//     the cut, the retry count untouched (a shutdown is not the agent's failure). The boot unit
//     of the next start finds it due (or re-arms it, if it is not yet);
//   - the retry is then armed with a short deadline, for the case where the manager stays (a
//     stop of the wake alone): its failure is a warning, never a refusal;
//   - the operator is told once, by the next command that holds the lock (tellShutdown), not
//     now: a delivery may take a minute and the shutdown does not wait.

// shutdownRetryAfter is when the cut session is retried if the manager stays.
const shutdownRetryAfter = time.Minute

// shutdownArmTimeout bounds the arming against a manager that is going away, well within the
// time a shutdown waits for a service to stop.
const shutdownArmTimeout = 5 * time.Second

// toldShutdown is the key of State.Told for a session cut short by a shutdown, to tell of.
const toldShutdown = "shutdown"

// retryAfterShutdown ends session n, cut short by a shutdown or a logout (o.reason is
// EndInterrupted): saved as armed for a retry first, then armed if the manager still answers.
func (r *runner) retryAfterShutdown(ctx context.Context, f *finishing) error {
	n, m, o := f.n, f.m, f.o
	if r.cancelRequested() {
		return r.honourCancel(ctx, f)
	}
	r.st.Last = r.outcomeRecord(f, o.detail)
	if err := r.finishClaims(f, nil); err != nil {
		r.warnf("%v", err)
	}
	t := ceilSecond(o.end.Add(shutdownRetryAfter)).UTC()
	r.st.Phase = PhaseArmed
	r.st.Wake = &t
	r.st.Reason = WhyRetry
	r.st.Holder = nil
	r.st.Claimed = nil
	if r.st.Told == nil {
		r.st.Told = map[string]time.Time{}
	}
	r.st.Told[toldShutdown] = o.end.UTC()
	if err := r.save(); err != nil {
		return err
	}
	r.recordHistory(f, m, "")
	actx, cancel := context.WithTimeout(ctx, shutdownArmTimeout)
	defer cancel()
	rep := validate.New(r.out)
	rep.Session = n
	if err := r.arm(actx, rep, t); err != nil {
		r.warnf("session %d was cut short (shutdown or logout): its retry at %s is in the state; the timer manager did not take it now (%v): the boot unit arms it at the next start", n, t.Format(time.RFC3339), err)
	}
	if err := r.saveLast(ctx, f); err != nil || r.st.Phase == PhaseCancelled {
		return err
	}
	r.printf("session %d was cut short by a shutdown or logout; it is retried at %s (once the timer manager runs again)", n, t.Format(time.RFC3339))
	return nil
}

// tellShutdown tells the operator, once, of a session a shutdown cut short and its retry.
func (r *runner) tellShutdown(ctx context.Context) {
	at, ok := r.st.Told[toldShutdown]
	if !ok {
		return
	}
	n := r.st.Session
	when := "now"
	if r.st.Wake != nil {
		when = "at " + r.st.Wake.UTC().Format(time.RFC3339)
	}
	r.notify(ctx, n, toldShutdown, fmt.Sprintf("chamber %s: session %d was cut short at %s by a shutdown or logout (the timer manager stopped it; the agent was stopped). It is retried once, %s; nothing else changed, and the plan goes on.",
		r.dir, n, at.Format(time.RFC3339), when))
	delete(r.st.Told, toldShutdown)
	if err := r.save(); err != nil {
		r.warnf("%v", err)
	}
}
