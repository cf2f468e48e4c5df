package chamber

import (
	"context"
	"fmt"
	"time"

	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/validate"
)

// dueTolerance absorbs clock granularity between the OS timer and our clock: a timer never
// fires before its time, but the two clocks may round differently.
const dueTolerance = 2 * time.Second

// WakeOptions are the options of `cryochamber wake`.
type WakeOptions struct {
	Dir string
	Now bool   // run a session now even if none is due
	At  string // move the plan's next wake to this time (WAKE's grammar) instead of running anything
}

// Wake is what the OS timer runs: it runs the session that is due, or does nothing.
func Wake(ctx context.Context, env *Env, opts WakeOptions) error {
	r, done, err := open(ctx, env, opts.Dir, openOptions{command: "wake", wait: true, degraded: true})
	if err != nil || done {
		return err
	}
	defer r.close()
	if opts.At != "" {
		t, err := ParseWhen(opts.At, r.cfg.Location, r.now())
		if err != nil {
			return usageErr(`give a time like WAKE's: "2026-12-01 09:00", "2026-12-01T09:00+01:00" or "+3d"`, "--at %q: %v", opts.At, err)
		}
		return r.moveWake(ctx, t, opts.At)
	}
	// The inbox is looked at as the very last step: a message that arrived while this wake ran
	// (delivering an alert, recovering) was merged by systemd into this very service and would
	// otherwise wait for the next WAKE.
	defer r.inboxLast(ctx)
	if r.fs == nil {
		return r.chamberGone(ctx)
	}
	if r.st.Missing != nil {
		r.printf("the chamber directory is back: %s", r.dir)
		r.st.Missing = nil
		_ = r.save()
	}
	r.reportDrift(ctx)
	if recovered, err := r.recover(ctx); recovered || err != nil {
		return err
	}
	if r.st.Phase == PhasePaused && r.st.PausedUntil != nil && !r.now().Before(r.st.PausedUntil.Add(-dueTolerance)) {
		r.printf("the pause ends (it was until %s)", r.st.PausedUntil.UTC().Format(time.RFC3339))
		return r.resume(ctx)
	}
	due, why, reason := r.due(opts.Now)
	if !due {
		r.printf("%s", reason)
		if r.st.Phase == PhaseArmed {
			r.logNote("wake: " + reason)
			r.repairWakeTimer(ctx)
		}
		r.repairTimers(ctx, timer.Fallback, timer.Alert, timer.Wake)
		return r.save()
	}
	r.repairTimers(ctx, timer.Alert)
	if !opts.Now {
		// The operator's limits: inside quiet hours or over the daily cap the wake defers
		// (a message stays in the inbox); past stop_after or max_sessions the plan ends.
		if held, err := r.guardWake(ctx, why); held {
			return err
		}
	}
	if why == WhyInbox {
		r.settleInbox(ctx)
	}
	wakeAt := r.now()
	if r.st.Wake != nil && why != WhyInbox && why != WhyRequested {
		wakeAt = *r.st.Wake
	}
	return r.runSession(ctx, r.st.Session+1, wakeAt, why)
}

// due decides whether a session should run now, and why (or why not).
func (r *runner) due(force bool) (bool, Why, string) {
	now := r.now()
	if r.cancelRequested() {
		return false, "", "chamber is cancelled; nothing to do"
	}
	switch r.st.Phase {
	case PhaseComplete:
		return false, "", "plan is complete; nothing to do"
	case PhaseFailed:
		return false, "", "chamber failed and is stopped (see `cryochamber status`); nothing to do"
	case PhaseCancelled:
		return false, "", "chamber is cancelled; nothing to do"
	case PhasePaused:
		return false, "", "chamber is paused (`cryochamber resume` to go on); nothing to do"
	}
	if force || r.store.flag(requestName) {
		return true, WhyRequested, ""
	}
	if r.st.Wake != nil && !now.Before(r.st.Wake.Add(-dueTolerance)) {
		why := r.st.Reason
		if why == "" {
			why = WhyPlan
		}
		return true, why, ""
	}
	if *r.cfg.WatchInbox && r.inboxCount() > 0 {
		return true, WhyInbox, ""
	}
	if t := r.earliestTodo(); t != nil && !now.Before(t.Add(-dueTolerance)) {
		return true, WhyTodo, ""
	}
	return false, "", fmt.Sprintf("not due: next wake at %s (%s); nothing to do", fmtTime(r.st.Wake), relTime(r.st.Wake, now))
}

// repairWakeTimer re-arms the wake timer when the OS no longer agrees with the state: a timer
// removed behind our back, one that runs a binary that is gone, or a launchd job that fired
// early (launchd repeats a calendar yearly, so after an early fire it would not fire again for
// a year).
func (r *runner) repairWakeTimer(ctx context.Context) {
	if r.st.Wake == nil || r.cancelRequested() {
		return
	}
	want := r.st.Timers.Wake
	if want == nil {
		want = r.st.Wake
	}
	var v timer.Verdict
	var name string
	err := r.withBackend(ctx, func(be timer.Backend) (err error) {
		name = be.Name()
		v, err = timer.Check(ctx, be, r.id, timer.Wake, *want)
		return err
	})
	if err != nil {
		r.warnf("cannot check the wake timer: %v", err)
		return
	}
	agree := v.Found && v.OK
	if r.st.Binary != "" && !exists(r.st.Binary) {
		agree = false // the timers run a binary that is gone: re-arm with one that is there
	}
	if z := r.st.Timers.Zone; z != "" && v.Zone != "" && v.Zone != z {
		agree = false // the machine's zone changed (travel): the calendar is computed again
	}
	if agree {
		return
	}
	rep := validate.New(nil)
	if err := r.arm(ctx, rep, *r.st.Wake); err != nil {
		r.warnf("the wake timer disagreed with the state and could not be re-armed: %v", err)
		return
	}
	note := fmt.Sprintf("wake: the %s wake timer disagreed with the state; re-armed it for %s", name, r.st.Wake.UTC().Format(time.RFC3339))
	r.logNote(note)
	r.printf("%s", note)
}

// repairTimers re-arms the timers of the kinds given that the state records but the OS no
// longer has: the dead-man, the alert retry, and the wake that ends a pause (an armed wake is
// repairWakeTimer's). On systemd the timers are transient and a reboot removes them; the boot
// unit then runs this wake, which re-arms them from the state. Each kind costs a question or
// two to the timer manager, and only when the state records that timer.
func (r *runner) repairTimers(ctx context.Context, kinds ...timer.Kind) {
	if r.unlocked || r.cancelRequested() {
		return
	}
	now := r.now()
	for _, k := range kinds {
		var at *time.Time
		argv := r.fallbackArgv()
		switch {
		case k == timer.Fallback && r.st.Phase.Active():
			at = r.st.Timers.Fallback
		case k == timer.Alert:
			at = r.st.Timers.Alert
		case k == timer.Wake && r.st.Phase == PhasePaused:
			at, argv = r.st.Timers.Wake, r.wakeArgv()
		}
		if at == nil || r.timerHolds(ctx, k, *at) {
			continue
		}
		t := *at
		if soon := ceilSecond(now.Add(armLead)); t.Before(soon) {
			t = soon // fell due while the OS had no timer: as soon as possible
		}
		t = t.UTC()
		job := timer.Job{Kind: k, At: t, Argv: argv}
		if err := r.withBackend(ctx, func(be timer.Backend) error { return be.Arm(ctx, r.timerChamber(), job) }); err != nil {
			r.warnf("the %s timer is missing and could not be re-armed: %v", k, err)
			continue
		}
		switch k {
		case timer.Fallback:
			r.st.Timers.Fallback = &t
		case timer.Alert:
			r.st.Timers.Alert = &t
		case timer.Wake:
			r.st.Timers.Wake = &t
		}
		note := fmt.Sprintf("wake: the %s timer was missing (after a reboot, the OS keeps none); re-armed it for %s", k, t.Format(time.RFC3339))
		r.logNote(note)
		r.printf("%s", note)
	}
}

// inboxLast is the last step of a wake: when a message (with watch_inbox) or a wake request is
// waiting and nothing is armed to come within seconds, it re-arms the wake a few seconds ahead.
// Its path unit (or send --wake) fired while this very service was running, and systemd merged
// that start into ours.
func (r *runner) inboxLast(ctx context.Context) {
	if r.fs == nil || r.st.Phase != PhaseArmed || r.cancelRequested() {
		return
	}
	now := r.now()
	req := r.store.flag(requestName)
	pending := req || (*r.cfg.WatchInbox && r.inboxCount() > 0)
	if !pending || r.st.Wake == nil || !r.st.Wake.After(now.Add(2*armLead)) || r.guardHolds() {
		return
	}
	t := now.Add(armLead).Truncate(time.Second).Add(time.Second)
	if err := r.arm(ctx, validate.New(nil), t); err != nil {
		r.warnf("a message is waiting but the wake could not be re-armed for it: %v", err)
		return
	}
	r.st.Wake, r.st.Reason = &t, WhyInbox
	if req {
		r.st.Reason = WhyRequested
	}
	if err := r.save(); err != nil {
		r.warnf("%v", err)
		return
	}
	r.printf("a message is waiting: next wake at %s", t.Format(time.RFC3339))
}

// settleInbox waits until messages stop arriving (1 s without a new one, at most 10 s), so that
// messages sent together are seen by one session.
func (r *runner) settleInbox(ctx context.Context) {
	last := r.inboxCount()
	quiet := 0
	for i := 0; i < 50 && quiet < 5; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		if n := r.inboxCount(); n != last {
			last, quiet = n, 0
		} else {
			quiet++
		}
	}
}

// chamberGone handles a wake (or dead-man) whose chamber directory cannot be opened: moved,
// deleted, or on a mount that is not up yet. The plan cannot run, but it must not stop in
// silence: the operator is alerted once (from the private state alone), and the wake is tried
// again on the retry schedule, so a mount that comes up later carries on by itself.
func (r *runner) chamberGone(ctx context.Context) error {
	what := r.chamberMissing()
	if r.st.Phase == PhasePaused {
		if ok, err := r.pausedGone(ctx); ok { // pausegone.go
			return err
		}
	}
	if !r.st.Phase.Active() {
		return &Error{Kind: Usage, Msg: what, Hint: "nothing is armed for it; if it moved: cryochamber start NEW/PATH/plan.md"}
	}
	now := r.now()
	first, t := r.missingRetry(now)
	armErr := r.arm(ctx, validate.New(nil), t)
	if armErr == nil {
		r.st.Phase, r.st.Wake, r.st.Reason = PhaseArmed, &t, WhyRetry
	}
	if err := r.save(); err != nil {
		r.warnf("%v", err)
	}
	if armErr == nil {
		r.heartbeatEnd(ctx, r.st.Session+1, false, "the chamber directory cannot be opened; retry at "+t.Format(time.RFC3339), &t, false) // heartbeat.go
	}
	if first {
		text := fmt.Sprintf("%s. The plan cannot run. If it is on a file system that is not mounted yet, the wake is tried again at %s.", what, t.Format(time.RFC3339))
		if armErr != nil {
			text += fmt.Sprintf(" (Re-arming failed too: %v.)", armErr)
		}
		r.alert(ctx, r.st.Session+1, "missing", text,
			fmt.Sprintf("if you moved it: cryochamber cancel --dir %s, then cryochamber start NEW/PATH/%s; if it was deleted: cryochamber cancel --dir %s", r.dir, r.planName(), r.dir), nil)
		_ = r.save()
	}
	return &Error{Msg: what, Hint: fmt.Sprintf("if you moved it: cryochamber cancel --dir %s, then start it at its new place", r.dir)}
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

func relTime(t *time.Time, now time.Time) string {
	if t == nil {
		return "never"
	}
	return Relative(*t, now)
}
